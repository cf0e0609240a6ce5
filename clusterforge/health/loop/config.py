"""The loop's configuration: rendered on the workstation from the spec, read on the head node.

The head node has no spec, journal or catalogue of the workstation's; it gets one JSON file
(``/etc/clusterforge/health-loop.json``, written by the ``health_loop`` role from the inventory variable
``health_loop_config``) that holds everything a round needs: the policy, the nodes with their pool, type
and hardware identities, the suites to run, where the shared state lives, and the fleet judge's inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.health.loop.slurm import VALIDATORS_LOCK
from clusterforge.spec.health import Health

CONFIG_PATH = "/etc/clusterforge/health-loop.json"
PARTITION = "health"
RESERVATION = "clusterforge_health"
STATE_FOLDER = "clusterforge-health"  # under the spec's shared storage path
REPLACEABLE_PROVIDERS = ("aws", "local")
SUITES = ("quick", "standard", "full")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class LoopNode:
    name: str
    pool: str
    instance_type: str
    identities: tuple[str, ...] = ()  # machine id first, then GPU UUIDs/serials


@dataclass(frozen=True)
class LoopConfig:
    stack: str
    health: Health
    state_dir: Path  # shared storage: <state_dir>/<stack>/{journal.*, baselines/, health-reports/}
    nodes: dict[str, LoopNode]
    active_suite: str  # validators suite of health.active.profile
    provider: str = "static"
    partition: str = PARTITION
    reservation: str = RESERVATION
    validators: tuple[str, ...] = ("/usr/local/bin/clusterforge-validators",)
    node_config: str = "/etc/clusterforge/node.json"  # NODE.json on every compute node
    validators_lock: str = VALIDATORS_LOCK  # the role's slurm_validators_lock, written in by the role
    time_limit_min: int = 60
    replace_hook: tuple[str, ...] = ()  # argv run on the head with the node name appended; () -> flag only
    textfile_dir: str = ""  # node_exporter's textfile folder ("" -> no metrics)
    fleet: Mapping[str, Any] = field(default_factory=dict)  # overrides, versions, across_versions, shares

    @property
    def stack_dir(self) -> Path:
        return self.state_dir / self.stack

    @property
    def reports_dir(self) -> Path:
        return self.stack_dir / "health-reports"

    @property
    def replaceable(self) -> bool:
        return self.provider in REPLACEABLE_PROVIDERS


def parse_config(data: Mapping[str, Any], where: str = "config") -> LoopConfig:
    """The JSON's dict -> LoopConfig; ConfigError naming the key on anything missing or wrong."""
    try:
        health = Health.model_validate(data.get("health") or {})
        suite = str(data["active_suite"])
        if suite not in SUITES:
            raise ConfigError(f"{where}: active_suite {suite!r}: give one of {', '.join(SUITES)}")
        nodes = {
            str(name): LoopNode(
                str(name),
                str(info["pool"]),
                str(info.get("instance_type") or ""),
                tuple(str(i) for i in info.get("identities") or ()),
            )
            for name, info in dict(data["nodes"]).items()
        }
        return LoopConfig(
            stack=str(data["stack"]),
            health=health,
            state_dir=Path(str(data["state_dir"])),
            nodes=nodes,
            active_suite=suite,
            provider=str(data.get("provider") or "static"),
            partition=str(data.get("partition") or PARTITION),
            reservation=str(data.get("reservation") or RESERVATION),
            validators=tuple(data.get("validators") or LoopConfig.validators),
            node_config=str(data.get("node_config") or LoopConfig.node_config),
            validators_lock=str(data.get("validators_lock") or VALIDATORS_LOCK),
            time_limit_min=int(data.get("time_limit_min") or 60),
            replace_hook=tuple(str(a) for a in data.get("replace_hook") or ()),
            textfile_dir=str(data.get("textfile_dir") or ""),
            fleet=dict(data.get("fleet") or {}),
        )
    except ConfigError:
        raise
    except KeyError as exc:
        raise ConfigError(f"{where}: missing key {exc.args[0]!r}") from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def read_config(path: Path) -> LoopConfig:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return parse_config(data, str(path))
