"""What each rank offers: cores, GPUs and properties, configured or discovered.

    inv = Inventory(cores={0: [0, 1]}, gpus={0: [0]}, properties={"batch": {0}})

An instance's inventory comes from, in order:

- Flux's `[resource]` table: `path` names an R file (RFC 20) to read, or
  `[[resource.config]]` entries give `hosts` (a hostlist) with `cores` and
  `gpus` (idsets) and `properties` (names); entries for the same host merge,
  as in Flux.  Hosts map to ranks by the instance's `hostlist`.
- otherwise discovery on this machine: the cores of the broker's CPU affinity
  (or `resource.cores-per-rank`/`resource.cores`) and the GPUs the drivers
  show, with `CUDA_VISIBLE_DEVICES` / `ROCR_VISIBLE_DEVICES` inherited from
  the environment narrowing (and renumbering) them, as a CUDA program sees
  them.  Every rank of a `fluxlite start` instance runs on this machine and
  offers the same.

`resource.exclude` (ranks or hosts) withholds ranks from scheduling: they
stay in the inventory, so `resource status` shows them, but the scheduler
never sees them.

GPU discovery reads only documented interfaces, each a pure parser over text
(tested on captured output): `nvidia-smi -L`, the driver's
`/proc/driver/nvidia/gpus/<pci>/` directories, and AMD's kfd topology
(`/sys/class/kfd/kfd/topology/nodes/N/properties`, a GPU is a node whose
`simd_count` is not 0) where `/dev/kfd` exists.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

from ..errors import UsageError
from ..util import hostlist, idset

PROPERTY_RX = re.compile(r"^[^\s!&'\"^`|()]+$")   # RFC 20: no space or constraint syntax


@dataclass
class Inventory:
    cores: dict[int, list[int]]
    gpus: dict[int, list[int]] = field(default_factory=dict)
    properties: dict[str, set[int]] = field(default_factory=dict)
    excluded: set[int] = field(default_factory=set)   # resource.exclude: never scheduled

    def props_of(self, rank: int) -> list[str]:
        return sorted(p for p, ranks in self.properties.items() if rank in ranks)

    def wire(self) -> dict:
        """As resource.acquire sends it: string ranks, idset-encoded properties; the
        excluded ranks are left out, as Flux leaves them out of the scheduler's R."""
        out = self.excluded
        return {"resources": {str(r): c for r, c in self.cores.items() if r not in out},
                "gpus": {str(r): g for r, g in self.gpus.items() if g and r not in out},
                "properties": {p: idset.encode(r - out) for p, r in self.properties.items()
                               if r - out}}


# ------------------------------------------------------------------ config
def _idset(value, where: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise UsageError(f"{where}: expected an idset string such as \"0-3\", got {value!r}")
    try:
        return sorted(idset.decode(value))
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None


def check_config(entries, where: str) -> list[dict]:
    """Check `[[resource.config]]` (a list of tables) and return it."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{where}: expected an array of tables ([[resource.config]])")
    for i, e in enumerate(entries):
        at = f"{where}[{i}]"
        unknown = set(e) - {"hosts", "cores", "gpus", "properties"}
        if unknown:
            raise UsageError(f"{at}: unknown key {sorted(unknown)[0]!r} (allowed: hosts, "
                             "cores, gpus, properties)")
        if not isinstance(e.get("hosts"), str):
            raise UsageError(f"{at}: hosts is required, a hostlist such as \"node[0-3]\"")
        try:
            hostlist.decode(e["hosts"])
        except (ValueError, UsageError) as exc:
            raise UsageError(f"{at}.hosts: {exc}") from None
        for key in ("cores", "gpus"):
            if key in e:
                _idset(e[key], f"{at}.{key}")
        props = e.get("properties", [])
        if not isinstance(props, list) or not all(isinstance(p, str) and PROPERTY_RX.match(p)
                                                  for p in props):
            raise UsageError(f"{at}.properties: expected an array of names (no spaces or "
                             f"any of !&'\"^`|()), got {props!r}")
    return entries


def from_config(entries: list[dict], hosts: tuple[str, ...] | list[str]) -> Inventory:
    """The inventory `[[resource.config]]` describes; `hosts` names each rank's host.
    Every host must be one of the instance's; every rank must be described."""
    rank_of: dict[str, list[int]] = {}
    for r, h in enumerate(hosts):
        rank_of.setdefault(h, []).append(r)
    cores: dict[int, set[int]] = {}
    gpus: dict[int, set[int]] = {}
    props: dict[str, set[int]] = {}
    for i, e in enumerate(entries):
        for h in hostlist.decode(e["hosts"]):
            if h not in rank_of:
                raise UsageError(f"resource.config[{i}]: host {h!r} is not in this "
                                 f"instance (hosts: {hostlist.encode(hosts)}; "
                                 "start --test-hosts names them)")
            for r in rank_of[h]:
                cores.setdefault(r, set()).update(_idset(e.get("cores", ""), "cores"))
                gpus.setdefault(r, set()).update(_idset(e.get("gpus", ""), "gpus"))
                for p in e.get("properties", []):
                    props.setdefault(p, set()).add(r)
    missing = [r for r in range(len(hosts)) if not cores.get(r)]
    if missing:
        raise UsageError(f"resource.config: no cores for rank(s) {idset.encode(missing)} "
                         f"(host {hosts[missing[0]]})")
    return Inventory(cores={r: sorted(c) for r, c in sorted(cores.items())},
                     gpus={r: sorted(g) for r, g in sorted(gpus.items()) if g},
                     properties=props)


def from_R(R: dict, size: int, where: str) -> Inventory:
    """The inventory an R (RFC 20) file describes (`resource.path`)."""
    try:
        cores: dict[int, list[int]] = {}
        gpus: dict[int, list[int]] = {}
        for item in R["execution"]["R_lite"]:
            ranks = idset.decode(item["rank"])
            c = sorted(idset.decode(item["children"].get("core", "")))
            g = sorted(idset.decode(item["children"].get("gpu", "")))
            for r in ranks:
                cores[r] = c
                if g:
                    gpus[r] = g
        props = {p: idset.decode(v) for p, v in R["execution"].get("properties", {}).items()}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UsageError(f"{where}: not an R (RFC 20) resource set: {exc}") from None
    missing = [r for r in range(size) if not cores.get(r)]
    if missing:
        raise UsageError(f"{where}: no cores for rank(s) {idset.encode(missing)} of "
                         f"this instance of size {size}")
    return Inventory(cores={r: cores[r] for r in range(size)},
                     gpus={r: gpus[r] for r in range(size) if r in gpus},
                     properties={p: {r for r in s if r < size} for p, s in props.items()})


def check_ranks(R: dict, size: int, where: str) -> None:
    """Refuse an R naming ranks this instance does not have (`resource reload`
    without --force leaves none out)."""
    try:
        ranks = set().union(*(idset.decode(item["rank"])
                              for item in R["execution"]["R_lite"]))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UsageError(f"{where}: not an R (RFC 20) resource set: {exc}") from None
    bad = sorted(r for r in ranks if r >= size)
    if bad:
        raise UsageError(f"{where}: rank(s) {idset.encode(bad)} are not in this instance of "
                         f"size {size} (--force leaves them out)")


def from_hwloc_xml(texts: dict[int, str], size: int, where: str) -> Inventory:
    """The cores each rank's hwloc XML (`resource reload -x`: <rank>.xml) lists: its
    Core objects (or PUs where there are none), numbered as hwloc's logical index."""
    import xml.etree.ElementTree as ET
    cores: dict[int, list[int]] = {}
    for rank, text in texts.items():
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise UsageError(f"{where}: {rank}.xml: not hwloc XML: {exc}") from None
        objs = [o for o in root.iter("object") if o.get("type") == "Core"] or \
            [o for o in root.iter("object") if o.get("type") == "PU"]
        if not objs:
            raise UsageError(f"{where}: {rank}.xml lists no Core or PU objects")
        cores[rank] = list(range(len(objs)))
    missing = [r for r in range(size) if r not in cores]
    if missing:
        raise UsageError(f"{where}: no <rank>.xml for rank(s) {idset.encode(missing)} of "
                         f"this instance of size {size}")
    return Inventory(cores={r: cores[r] for r in range(size)})


def exclude_ranks(value: str, hosts: tuple[str, ...] | list[str]) -> set[int]:
    """The ranks `resource.exclude` names: an idset of ranks ("0,3") or a hostlist
    of the instance's hosts ("node[0,3]"), as in Flux."""
    if not value:
        return set()
    where = f"resource.exclude {value!r}"
    try:
        ranks = idset.decode(value)
    except ValueError:
        return _exclude_hosts(value, hosts, where)
    bad = sorted(r for r in ranks if r >= len(hosts))
    if bad:
        raise UsageError(f"{where}: rank {bad[0]} is not in this instance of size "
                         f"{len(hosts)}")
    return ranks


def _exclude_hosts(value: str, hosts, where: str) -> set[int]:
    try:
        names = hostlist.decode(value)
    except (ValueError, UsageError) as exc:
        raise UsageError(f"{where}: neither an idset of ranks nor a hostlist: "
                         f"{exc}") from None
    unknown = [h for h in names if h not in hosts]
    if unknown:
        raise UsageError(f"{where}: host {unknown[0]!r} is not in this instance "
                         f"(hosts: {hostlist.encode(hosts)})")
    return {r for r, h in enumerate(hosts) if h in names}


# --------------------------------------------------------------- discovery
SMI_RX = re.compile(r"^GPU (\d+): .*\(UUID: ([^)]+)\)", re.M)


def parse_nvidia_smi(text: str) -> list[int]:
    """GPU indices from `nvidia-smi -L` ('GPU 0: NVIDIA H100 (UUID: GPU-...)')."""
    return sorted(int(m.group(1)) for m in SMI_RX.finditer(text))


def nvidia_proc(root: str = "/") -> list[int]:
    """GPUs the NVIDIA driver lists under /proc/driver/nvidia/gpus (one directory each,
    in PCI bus order, which is CUDA's default enumeration order)."""
    base = os.path.join(root, "proc/driver/nvidia/gpus")
    try:
        return list(range(len([d for d in os.listdir(base)
                               if os.path.isdir(os.path.join(base, d))])))
    except OSError:
        return []


def amd_kfd(root: str = "/") -> list[int]:
    """AMD GPUs from the kfd topology: nodes with SIMDs, where /dev/kfd exists."""
    if not os.path.exists(os.path.join(root, "dev/kfd")):
        return []
    base = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    try:
        nodes = sorted(os.listdir(base), key=lambda n: int(n) if n.isdigit() else 1 << 30)
    except OSError:
        return []
    n = 0
    for node in nodes:
        try:
            with open(os.path.join(base, node, "properties")) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^simd_count\s+(\d+)", text, re.M)
        if m and int(m.group(1)) > 0:
            n += 1
    return list(range(n))


def visible(ids: list[int], value: str | None) -> list[int]:
    """The GPUs a process sees when its environment sets CUDA_VISIBLE_DEVICES (or
    ROCR_VISIBLE_DEVICES) to `value`: the listed indices that exist, renumbered
    from 0 in the order given, up to the first that does not (as CUDA reads it).
    None (unset) shows all; an empty string shows none."""
    if value is None:
        return list(ids)
    out = 0
    for word in value.split(","):
        word = word.strip()
        if not word.isdigit() or int(word) not in ids:
            break
        out += 1
    return list(range(out))


def _run_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                              timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def discover_gpus(root: str = "/", env=None, smi=_run_smi) -> tuple[str, list[int]]:
    """(vendor, GPU ids this process may use) on this machine."""
    env = os.environ if env is None else env
    ids = nvidia_proc(root)
    if not ids and root == "/":
        ids = parse_nvidia_smi(smi())
    if ids:
        return "nvidia", visible(ids, env.get("CUDA_VISIBLE_DEVICES"))
    ids = amd_kfd(root)
    if ids:
        return "amd", visible(ids, env.get("ROCR_VISIBLE_DEVICES"))
    return "", []


def machine_cores() -> list[int]:
    """The core ids this process may run on (its CPU affinity)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def from_attrs(attrs: dict[str, str], hosts: tuple[str, ...] | list[str]) -> Inventory:
    """The inventory of a `fluxlite start` instance of len(hosts) ranks from its
    attributes: resource.path, else resource.config, else discovery (cores from
    resource.cores / resource.cores-per-rank / the CPU affinity; GPUs from the
    drivers), less the ranks resource.exclude names."""
    inv = _from_attrs(attrs, hosts)
    inv.excluded = exclude_ranks(attrs.get("resource.exclude") or "", hosts)
    return inv


def _from_attrs(attrs: dict[str, str], hosts: tuple[str, ...] | list[str]) -> Inventory:
    import json
    size = len(hosts)
    path = attrs.get("resource.path") or ""
    if path:
        try:
            with open(path) as f:
                R = json.load(f)
        except OSError as exc:
            raise UsageError(f"resource.path: cannot read {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(f"resource.path: {path} is not JSON: {exc}") from None
        return from_R(R, size, f"resource.path {path}")
    config = json.loads(attrs.get("resource.config") or "[]")
    if config:
        return from_config(config, hosts)
    cores_attr = attrs.get("resource.cores") or ""
    if cores_attr:
        cores = sorted(idset.decode(cores_attr))
    else:
        n = int(attrs.get("resource.cores-per-rank") or 0)
        cores = list(range(n)) if n else machine_cores()
    _, gpus = discover_gpus()
    return Inventory(cores={r: list(cores) for r in range(size)},
                     gpus={r: list(gpus) for r in range(size)} if gpus else {})
