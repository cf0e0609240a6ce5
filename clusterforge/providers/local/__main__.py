"""Small helpers for the local provider, used by scripts/setup.d and by people at a shell.

python -m clusterforge.providers.local image    # build the node image unless it exists; print its tag
python -m clusterforge.providers.local env      # `export` lines for running podman by hand
"""

from __future__ import annotations

import argparse
import sys
import time

from clusterforge.providers.base import ProviderError
from clusterforge.providers.local import config, image
from clusterforge.providers.local.engine import detect_engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterforge.providers.local")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("image", help="build the node image unless it exists; print its tag")
    build.add_argument("--engine", choices=["auto", "podman", "docker"], default="auto")
    build.add_argument("--suite", default="bookworm")
    sub.add_parser("env", help="print export lines selecting the project's podman configuration")
    sub.add_parser("prune", help="remove node images of older recipes that no container uses")
    args = parser.parse_args(argv)
    try:
        if args.command == "env":
            for key, value in config.write_podman_config().items():
                print(f"export {key}={value}")
            return 0
        if args.command == "prune":
            engine = detect_engine()
            keep = image.image_tag(engine.name, "bookworm", image.machine_mirrors("bookworm"))
            for tag in image.prune_images(engine, keep):
                print(f"removed {tag}")
            return 0
        engine = detect_engine(args.engine)
        started = time.monotonic()
        tag, built = image.ensure_image(engine, args.suite)
        verb = f"built in {time.monotonic() - started:.0f} s" if built else "already present"
        print(f"{tag} ({verb})")
        return 0
    except ProviderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
