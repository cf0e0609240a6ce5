"""clusterforge's front door: `invoke --list` shows the tasks, `invoke --help TASK` explains one.

Tasks stay thin: parse arguments, call `clusterforge`, print. Each part keeps its tasks in a
module under clusterforge/tasks/ and adds them to the root Collection below, explicitly.
"""

from invoke import Collection

from clusterforge.tasks import dev
from clusterforge.tasks import spec as spec_tasks

ns = Collection()

# spec.check, spec.schema, spec.checks (foundation)
ns.add_collection(Collection.from_module(spec_tasks, name="spec"))

# test, lint (foundation)
ns.add_task(dev.test)
ns.add_task(dev.lint)

# up, down, status, certify (pipeline)
from clusterforge.tasks import cluster  # noqa: E402

ns.add_task(cluster.up)
ns.add_task(cluster.down)
ns.add_task(cluster.status)
ns.add_task(cluster.certify)

# preview, aws-preflight (aws provider)
from clusterforge.tasks import aws as aws_tasks  # noqa: E402

ns.add_task(aws_tasks.preview)
ns.add_task(aws_tasks.preflight, name="aws-preflight")

# plan (cluster changes)
from clusterforge.tasks import plan as plan_tasks  # noqa: E402

ns.add_task(plan_tasks.plan)

# drift (what `up` would converge, and why; changes nothing)
from clusterforge.tasks import drift as drift_tasks  # noqa: E402

ns.add_task(drift_tasks.drift)

# upgrade, replace (changing a running stack: rolling upgrade, node replacement)
from clusterforge.tasks import upgrade as upgrade_tasks  # noqa: E402

ns.add_task(upgrade_tasks.upgrade)
ns.add_task(upgrade_tasks.replace)

# baseline.show, baseline.export, baseline.import (fleet judging)
from clusterforge.tasks import baseline as baseline_tasks  # noqa: E402

ns.add_collection(Collection.from_module(baseline_tasks, name="baseline"))

# state.push, state.pull, state.show, state.unlock (the stack's state in its backend)
from clusterforge.tasks import state as state_tasks  # noqa: E402

ns.add_collection(Collection.from_module(state_tasks, name="state"))

# image.bake, image.show (node images that boot ready)
from clusterforge.tasks import image as image_tasks  # noqa: E402

ns.add_collection(Collection.from_module(image_tasks, name="image"))

# benchmark (representative workloads on certified nodes: scaling, breakdown, what limits them)
from clusterforge.tasks import benchmark as benchmark_tasks  # noqa: E402

ns.add_task(benchmark_tasks.benchmark)

# health.plan (the health policy's decisions now, from the journal; --dry-run only)
from clusterforge.tasks import health as health_tasks  # noqa: E402

ns.add_collection(Collection.from_module(health_tasks, name="health"))

# --- Other parts add their tasks here, one explicit line each, e.g. -------------------------
#   pipeline:  from clusterforge.tasks import cluster; ns.add_task(cluster.up); ns.add_task(cluster.down)
#              ns.add_task(cluster.status); ns.add_task(cluster.certify)
#   aws:       from clusterforge.tasks import aws; ns.add_task(aws.preview)
# Add a task only once it works (no stubs). Errors: raise invoke.exceptions.Exit(message, code=1);
# wrap bodies with clusterforge.tasks._cli.friendly so users never see a traceback unless
# CLUSTERFORGE_DEBUG=1.
