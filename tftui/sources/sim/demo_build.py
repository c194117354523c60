"""The demo generator's placement: node kinds become nodes and GPUs, workloads are placed on them.

All of the demo's randomness is drawn here, in a fixed order, before any object is emitted, so the
emitters (demo_emit.py and its parts) only read a finished, consistent state.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from random import Random
from typing import Any

from tftui.model.gpuinfo import GPUInfo, by_short_name
from tftui.sources.sim.demo_layout import (
    _EMPTY_ROLES,
    _GPU_DISCOVERED_AFTER,
    _KINDS,
    _POD_ALPHABET,
    _POOLS,
    _SCHEDULABLE_AFTER,
    _YOUNG_ROLES,
    _ZONES,
    CLUSTER_NAME,
    DEFAULT_NOW,
    GI,
    MI,
    _instance,
    _Kind,
    _Shape,
    _ts,
    as_utc,
)

# --------------------------------------------------------------------------------------------
# Mutable placement state (plain slotted classes: this is the hot path for large clusters).
# --------------------------------------------------------------------------------------------


class _Gpu:
    __slots__ = (
        "avail_t",
        "avail_v",
        "count",
        "created",
        "index",
        "name",
        "native",
        "node",
        "open",
        "workers",
    )

    def __init__(self, node: _Node, index: int, name: str, cap_t: int, cap_v: int) -> None:
        self.node = node
        self.index = index
        self.name = name
        self.avail_t = cap_t
        self.avail_v = cap_v
        self.count = 0
        self.open = False
        self.native = False
        self.workers: list[_Worker] = []
        self.created = node.created


class _Node:
    __slots__ = (
        "claim", "created", "gpus", "index", "instance", "kind", "lim_t", "lim_v", "name", "price",
        "ram", "role", "uid", "virt_t", "virt_v", "workers", "zone",
    )  # fmt: skip

    def __init__(self, kind: _Kind, index: int, name: str) -> None:
        self.kind = kind
        self.index = index
        self.name = name
        self.role = "normal"
        self.gpus: list[_Gpu] = []
        self.workers: list[_Worker] = []
        self.created = DEFAULT_NOW
        self.zone = ""
        self.instance: tuple[str, int, int, float | None] = ("", 0, 0, None)
        self.ram = 0
        self.price = 0.0
        self.virt_t = 0
        self.virt_v = 0
        self.lim_t = 0
        self.lim_v = 0
        self.claim = ""
        self.uid = ""


class _Workload:
    __slots__ = ("autoscale", "created", "isolation", "kind", "name", "namespace", "pdb", "profile", "qos",
                 "shape", "uid", "workers")  # fmt: skip

    def __init__(self, kind: _Kind, shape: _Shape, namespace: str, qos: str, profile: str) -> None:
        self.kind = kind
        self.shape = shape
        self.namespace = namespace
        self.qos = qos
        self.profile = profile
        self.name = ""
        self.uid = ""
        self.created = DEFAULT_NOW
        self.autoscale = False
        self.isolation = "soft"
        self.pdb = ""  # "", "max1" or "min"
        self.workers: list[_Worker] = []


class _Worker:
    __slots__ = ("created", "gpus", "name", "node", "uid", "workload")

    def __init__(self, workload: _Workload, node: _Node, gpus: list[_Gpu]) -> None:
        self.workload = workload
        self.node = node
        self.gpus = gpus
        self.name = ""
        self.uid = ""
        self.created = DEFAULT_NOW


class _KindState:
    """Per node kind: its nodes and the ring of nodes that still accept workers."""

    __slots__ = ("cap", "cursor", "exhausted", "kind", "min_t", "min_v", "nodes", "placed", "ring", "widened")

    def __init__(self, kind: _Kind, nodes: list[_Node]) -> None:
        self.kind = kind
        self.nodes = nodes
        self.ring = [n for n in nodes if any(g.open for g in n.gpus)]
        self.cursor = 0
        self.placed = 0
        self.exhausted = not self.ring
        self.min_t = min(s.req_t for s in kind.shapes) * 1000
        self.min_v = min(s.req_gi for s in kind.shapes) * GI
        self.cap = kind.cap
        self.widened = False


def _pick(rng: Random, weighted: tuple[tuple[Any, float], ...]) -> Any:
    x = rng.random() * sum(w for _, w in weighted)
    for value, w in weighted:
        x -= w
        if x < 0:
            return value
    return weighted[-1][0]


def _apportion(total: int, weights: list[float]) -> list[int]:
    """Split `total` by `weights` with the largest-remainder method (deterministic, sums exactly)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    raw = [total * w / s for w in weights]
    out = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


# --------------------------------------------------------------------------------------------
# The generator.
# --------------------------------------------------------------------------------------------


class _Builder:
    """Builds the installation in memory: nodes and their roles first, then workloads placed on them."""

    def __init__(
        self, seed: int, nodes: int, now: datetime, gpus_per_node: int | None, workers: int | None
    ) -> None:
        if nodes < 1:
            raise ValueError("nodes must be at least 1")
        if gpus_per_node is not None and gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        if workers is not None and workers < 0:
            raise ValueError("workers must not be negative")
        self.rng = Random(seed)
        self.rng_seed = seed
        self.n_nodes = nodes
        self.now = as_utc(now).replace(microsecond=0)
        self.gpus_per_node = gpus_per_node
        self.workers_target = workers
        self.gpu_info: dict[str, GPUInfo] = {}
        for kind in _KINDS:
            info = by_short_name(kind.gpu_model)
            if info is None:  # pragma: no cover - the packaged table has every model we use
                raise LookupError(f"GPU model {kind.gpu_model} missing from gpu-info.csv")
            self.gpu_info[kind.key] = info
        self.kinds: list[_KindState] = []
        self.workloads: list[_Workload] = []
        self.names: dict[str, set[str]] = {}
        self.stem_counter: dict[tuple[str, str], int] = {}
        self.pool_uids: dict[str, str] = {}
        self.cluster_uid = ""

    # -- small helpers -------------------------------------------------------------------------

    def uid(self) -> str:
        """A random (version 4) UUID string from the seeded RNG; formatted by hand, uuid.UUID is slow."""
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def suffix(self) -> str:
        """Five characters from the alphabet Kubernetes uses for generated names."""
        x = self.rng.getrandbits(32)
        out = []
        for _ in range(5):
            x, r = divmod(x, 27)
            out.append(_POD_ALPHABET[r])
        return "".join(out)

    def ago(self, seconds: float) -> datetime:
        return self.now - timedelta(seconds=int(seconds))

    # -- nodes ---------------------------------------------------------------------------------

    def build_nodes(self) -> None:
        rng = self.rng
        counts = _apportion(self.n_nodes, [k.share for k in _KINDS])
        if self.n_nodes >= len(_KINDS):  # every kind present, so every pool has nodes
            for i, c in enumerate(counts):
                if c == 0:
                    j = max(range(len(counts)), key=lambda x: counts[x])
                    counts[j] -= 1
                    counts[i] = 1
        for kind, count in zip(_KINDS, counts, strict=True):
            gpus = self.gpus_per_node or kind.gpus
            info = self.gpu_info[kind.key]
            cap_t, cap_v = info.tflops_milli, kind.vram_mib * MI
            pool = next(p for p in _POOLS if p.name == kind.pool)
            inst = _instance(kind, gpus)
            width = max(2, len(str(count)))
            nodes = [_Node(kind, i, f"{kind.prefix}-{i + 1:0{width}d}") for i in range(count)]
            self.assign_roles(kind, nodes)
            lo, hi = kind.age_days
            for node in nodes:
                if node.role in _YOUNG_ROLES:
                    node.created = self.ago(rng.uniform(60, 270))
                else:
                    # older names were created earlier: age falls with the index, plus jitter
                    frac = 1.0 - (node.index + rng.random()) / max(count, 1)
                    node.created = self.ago(86400 * (lo + (hi - lo) * frac))
                node.zone = _ZONES[rng.randrange(len(_ZONES))]
                node.instance = inst
                node.ram = inst[2] * GI
                # the GPU table's price, like upstream's raw_cost, so cost views and compaction agree
                node.price = round(info.price_per_hour * gpus, 4)
                total_t, total_v = cap_t * gpus, cap_v * gpus
                node.virt_t = total_t * pool.oversell // 100
                node.virt_v = total_v + node.ram * pool.mem_pct // 100 + kind.disk * pool.disk_pct // 100
                node.gpus = [_Gpu(node, i, f"gpu-{self.uid()}", cap_t, cap_v) for i in range(gpus)]
                gpu_created = node.created + _GPU_DISCOVERED_AFTER
                for g in node.gpus:
                    g.created = gpu_created
                if node.role == "native":
                    node.gpus[-1].native = True
                if node.role not in _EMPTY_ROLES:
                    self.open_gpus(kind, node)
            self.kinds.append(_KindState(kind, nodes))

    def assign_roles(self, kind: _Kind, nodes: list[_Node]) -> None:
        """Mark the special nodes (empty, young, protected, cordoned, native GPU) of one kind.

        Counts scale with the kind's node count so a 5000-node cluster keeps the same mix; young
        nodes take the highest numbers (they joined last), the others are spread at random.
        """
        n = len(nodes)
        factor = max(1.0, n / kind.default_nodes)
        roles: list[str] = []
        for role in dict.fromkeys(kind.roles):
            per_default = kind.roles.count(role)
            roles += [role] * max(1, round(per_default * factor))
        roles = roles[: max(0, n - 1)]  # always keep one ordinary node
        young = [r for r in roles if r in _YOUNG_ROLES]
        others = [r for r in roles if r not in _YOUNG_ROLES]
        for offset, role in enumerate(young):
            nodes[n - 1 - offset].role = role
        free = list(range(n - len(young)))
        for role, idx in zip(others, self.rng.sample(free, min(len(others), len(free))), strict=False):
            nodes[idx].role = role

    def open_gpus(self, kind: _Kind, node: _Node) -> None:
        """Choose which GPUs of a node get TF workers; the dev pool's plan makes it fragmented."""
        candidates = [g for g in node.gpus if not g.native]
        if not candidates:
            return
        value = _pick(self.rng, kind.open_plan)
        k = value if value > 0 else len(node.gpus) + value
        if node.role == "young_busy":
            k = min(k, 2)
        k = max(1, min(k, len(candidates)))
        if kind.pool == "dev" and k < len(candidates):
            # LowLoadFirst spreads: the used GPU is whichever the scheduler found emptiest
            chosen = self.rng.sample(candidates, k)
        else:
            chosen = candidates[:k]
        for g in chosen:
            g.open = True

    # -- workloads and placement ---------------------------------------------------------------

    def place_all(self) -> None:
        weights = [
            sum(1 for n in ks.nodes for g in n.gpus if g.open) * ks.kind.density * (0 if ks.exhausted else 1)
            for ks in self.kinds
        ]
        target = self.workers_target
        if target is None:
            target = round(sum(weights))
        budgets = _apportion(target, weights)
        for ks, budget in zip(self.kinds, budgets, strict=True):
            self.fill(ks, budget)
        # capacity a kind could not use flows to the kinds that still have room; when none has,
        # open the GPUs the layout left idle (the fragmented dev pool last, to keep its story)
        remaining = target - sum(ks.placed for ks in self.kinds)
        widen_order = sorted(self.kinds, key=lambda ks: ks.kind.pool == "dev")
        while remaining > 0:
            live = [ks for ks in self.kinds if not ks.exhausted]
            if not live:
                if not any(self.widen(ks) for ks in widen_order):
                    break
                continue
            shares = _apportion(remaining, [1.0] * len(live))
            for ks, share in zip(live, shares, strict=True):
                if share:
                    self.fill(ks, ks.placed + share)
            remaining = target - sum(ks.placed for ks in self.kinds)

    def widen(self, ks: _KindState) -> bool:
        """Open every GPU of the kind's busy nodes and allow one more worker per GPU (once per kind)."""
        if ks.widened:
            return False
        ks.widened = True
        for node in ks.nodes:
            if node.role not in _EMPTY_ROLES:
                for g in node.gpus:
                    g.open = not g.native
        ks.cap += 1
        ks.ring = [n for n in ks.nodes if any(g.open for g in n.gpus)]
        ks.cursor = 0
        ks.exhausted = not ks.ring
        return True

    def fill(self, ks: _KindState, budget: int) -> None:
        """Create workloads for one kind until `budget` workers are placed or no shape fits any more."""
        rng = self.rng
        kind = ks.kind
        failures = 0
        while ks.placed < budget and not ks.exhausted:
            shape = _pick(rng, tuple((s, s.weight) for s in kind.shapes))
            replicas = min(_pick(rng, kind.replicas), budget - ks.placed)
            profile = _pick(rng, kind.profiles)
            if profile == "bursty" and shape.lim_t * 10 < shape.req_t * 13:
                profile = "right-sized"  # a burst needs headroom between request and limit
            wl = _Workload(kind, shape, rng.choice(shape.namespaces), _pick(rng, kind.qos), profile)
            used: set[str] = set()
            for _ in range(replicas):
                gpus = self.find(ks, wl, used)
                if gpus is None:
                    break
                node = gpus[0].node
                worker = _Worker(wl, node, gpus)
                used.add(node.name)
                req_t, req_v = shape.req_t * 1000, shape.req_gi * GI
                for g in gpus:
                    g.avail_t -= req_t
                    g.avail_v -= req_v
                    g.count += 1
                    g.workers.append(worker)
                node.lim_t += shape.lim_t * 1000
                node.lim_v += shape.lim_gi * GI
                node.workers.append(worker)
                wl.workers.append(worker)
                ks.placed += 1
            if not wl.workers:
                failures += 1
                if failures >= 25:
                    ks.exhausted = True
                continue
            failures = 0
            self.finish_workload(wl)

    def find(self, ks: _KindState, wl: _Workload, used: set[str]) -> list[_Gpu] | None:
        """Next node on the kind's ring (round robin, so replicas spread) with room for one worker."""
        shape = wl.shape
        req_t, req_v = shape.req_t * 1000, shape.req_gi * GI
        lim_t, lim_v = shape.lim_t * 1000, shape.lim_gi * GI
        cap = ks.cap
        compact = ks.kind.pool == "training"
        ring = ks.ring
        tries = min(len(ring), 48)
        for _ in range(tries):
            if not ring:
                break
            i = ks.cursor % len(ring)
            node = ring[i]
            ks.cursor = i + 1
            if node.name in used and len(ring) > len(used):
                continue
            if node.lim_t + lim_t <= node.virt_t and node.lim_v + lim_v <= node.virt_v:
                fits = [
                    g
                    for g in node.gpus
                    if g.open and g.count < cap and g.avail_t >= req_t and g.avail_v >= req_v
                ]
                if len(fits) >= shape.gpu_count:
                    if compact:  # CompactFirst: the fullest GPU that fits
                        fits.sort(key=lambda g: (g.avail_v, g.avail_t, g.index))
                    else:  # LowLoadFirst / NodeCompactGPULowLoad within a node: the emptiest
                        fits.sort(key=lambda g: (-g.avail_v, -g.avail_t, g.index))
                    return sorted(fits[: shape.gpu_count], key=lambda g: g.index)
            if not any(
                g.open and g.count < cap and g.avail_t >= ks.min_t and g.avail_v >= ks.min_v
                for g in node.gpus
            ):  # nothing the kind's smallest shape could use: drop the node from the ring
                ring.pop(i)
                ks.cursor = i
        if not ring:
            ks.exhausted = True
        return None

    @staticmethod
    def whole_gpus(wl: _Workload) -> bool:
        """Whether every worker of `wl` is alone on its GPUs (what shared isolation needs)."""
        return all(len(g.workers) == 1 for w in wl.workers for g in w.gpus)

    def name_workload(self, wl: _Workload) -> str:
        taken = self.names.setdefault(wl.namespace, set())
        stems = wl.shape.stems
        stem = stems[self.rng.randrange(len(stems))]
        name = stem
        while name in taken:
            key = (wl.namespace, stem)
            n = self.stem_counter.get(key, 1) + 1
            self.stem_counter[key] = n
            name = f"{stem}-{n}"
        taken.add(name)
        return name

    def finish_workload(self, wl: _Workload) -> None:
        """Names, ages and knobs of a placed workload and its workers."""
        rng = self.rng
        wl.name = self.name_workload(wl)
        wl.uid = self.uid()
        if rng.random() < 0.12:
            wl.created = self.ago(rng.uniform(15 * 60, 110 * 60))
        else:
            wl.created = self.ago(3 * 3600 + (30 * 86400 - 3 * 3600) * rng.random() ** 2)
        wl.autoscale = rng.random() < (0.3 if wl.namespace == "research" else 0.12)
        if wl.kind.pool == "dev" and rng.random() < 0.15 and self.whole_gpus(wl):
            wl.isolation = "shared"  # a shared worker holds its whole GPU: nothing else may land there
            for w in wl.workers:
                for g in w.gpus:
                    g.avail_t = g.avail_v = 0
        r = rng.random()
        wl.pdb = "" if r < 0.1 else ("min" if r < 0.3 else "max1")
        latest = self.now - timedelta(seconds=60)
        for w in wl.workers:
            lo = max(wl.created, w.node.created + _SCHEDULABLE_AFTER)
            if lo >= latest:
                lo = min(lo, self.now - timedelta(seconds=10))
                w.created = lo
            elif rng.random() < 0.7:  # started with the workload
                w.created = min(lo + timedelta(seconds=rng.uniform(5, 600)), latest)
            else:  # rescheduled since
                w.created = lo + timedelta(seconds=rng.uniform(0, (latest - lo).total_seconds()))
            w.created = w.created.replace(microsecond=0)
            w.uid = self.uid()
            prefix = f"{wl.name}-tf-worker-"
            names = {x.name for x in wl.workers}
            name = prefix + self.suffix()
            while name in names:
                name = prefix + self.suffix()
            w.name = name
        self.workloads.append(wl)


# --------------------------------------------------------------------------------------------


class _EmitterBase:
    """What every emitter part reads from the placed state; the parts are mixins over it."""

    def __init__(self, b: _Builder) -> None:
        self.b = b
        self.now = b.now
        self.now_s = _ts(b.now)
        self.pool_defs = {p.name: p for p in _POOLS}
        self.kinds_by_pool: dict[str, list[_KindState]] = {}
        for ks in b.kinds:
            self.kinds_by_pool.setdefault(ks.kind.pool, []).append(ks)

    def pool_name(self, pool: str) -> str:
        return f"{CLUSTER_NAME}-{pool}"
