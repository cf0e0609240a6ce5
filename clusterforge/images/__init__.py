"""Node images that boot ready: the node software baked once, recorded with its software digest."""
