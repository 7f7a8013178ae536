# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Reconciliation: (desired instances, actual resctrl) -> actions. Pure.

Who owns what (doc/source/admin/agent.rst has the long version):

* libvirt creates the group of each ``<cachetune>``/``<memorytune>``
  (``qemu-<id>-<name>-vcpus_<set>``) and places the vCPUs once. The agent
  puts vCPU threads back when they drift, restores a deleted group with the
  schemata of the domain XML (carving dedicated ways from the free ones, as
  libvirt does), and writes the MB line of an allocation whose bandwidth
  limit libvirt cannot express (MBps, AMD units).
* The agent owns ``<prefix>mb<N>`` (instances sharing a percentage),
  ``<prefix>i-<uuid>`` (an instance's own limit when it has no cache
  allocation) and ``<prefix>m-<uuid>`` (monitoring groups). Its control
  groups get the default group's cache masks: a new group would otherwise
  take every way, libvirt's dedicated ones included, and leave libvirt no
  room to allocate.
* The default group's L3 masks shrink to ``[rdt] default_group_l3_ways``.
* An instance whose threads sit in a group that counts only it (a libvirt
  allocation, its ``i-`` group) is monitored through that group's RMID;
  the others get a monitoring group under their control group, within the
  RMID budget (the ``window`` of :mod:`rdt_virt.agent.rotation`).
* Nothing else is touched: a group is removed only if it has the prefix,
  no instance needs it and it holds no thread of anyone else; threads of an
  instance without a policy, or whose group cannot be made now, are taken
  out of stale agent or libvirt groups but left where another tool put
  them.

Actions come out in an order that is valid on the kernel: the default
group first, new control groups, schemata, monitoring group moves, thread
moves, monitoring group removals (freeing RMIDs), new monitoring groups,
their threads, and finally unused control groups. A converged host gives
no action at all.
"""

import dataclasses
import functools
import typing

from rdt_virt.agent import levelgroups
from rdt_virt.agent import masks
from rdt_virt.agent import model
from rdt_virt.policy import groups as groups_mod
from rdt_virt.resctrl import info
from rdt_virt.resctrl import names
from rdt_virt.resctrl import schemata as schemata_mod

ROOT = model.ROOT

R_DISABLED = 'monitoring disabled'
R_NO_MON = 'host has no monitoring'
R_NO_PROCESS = 'QEMU process not found'
R_SPLIT = 'threads in several control groups'
R_FOREIGN = 'threads held by group %s of another tool'
R_ROTATED = 'rotated out (RMID budget)'
R_PENDING = 'control group not created yet'
R_POOL = ('no free PMG in control group %s (MPAM: %d monitoring groups per '
          'control group)')

LOW = 'low'     # the protection class the bandwidth controller moves


# Names are derived from validated uuids on every tick: remember them.
_shared_group = functools.lru_cache(maxsize=1024)(groups_mod.shared_group)
_instance_group = functools.lru_cache(maxsize=8192)(groups_mod.instance_group)
_mon_group = functools.lru_cache(maxsize=8192)(groups_mod.mon_group)
_parse = functools.lru_cache(maxsize=8192)(groups_mod.parse)


# The rule lives with resctrl, where the privileged daemon can use it too.
is_libvirt_group = names.is_libvirt_group


default_masks = masks.default_masks
expected_mb = masks.expected_mb


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration the reconciliation depends on."""

    prefix: str = 'rdtvirt-'
    default_l3_ways: int = 0
    place_extra: bool = False


@dataclasses.dataclass
class Result:
    actions: typing.List[typing.Any]
    placements: typing.Dict[str, model.Placement]
    warnings: typing.List[str]
    # A libvirt group is missing and only a full snapshot can restore it.
    needs_full: bool = False
    # Threads someone moved out of their group, being put back:
    # [Repair], for the agent to log once each move succeeds.
    repairs: typing.List[typing.Any] = dataclasses.field(
        default_factory=list)


@dataclasses.dataclass(frozen=True)
class Repair:
    """A thread found away from its control group, moved back."""

    uuid: str
    tid: int
    found: typing.Optional[str]     # where it was (None: default group)
    group: typing.Optional[str]     # where it goes back to


# Intents ---------------------------------------------------------------------

@dataclasses.dataclass
class _Intent:
    inst: model.Instance
    threads: typing.Optional[model.Threads]
    agent_group: typing.Optional[str]
    # Desired control group per placed thread.
    tid_group: typing.Dict[int, typing.Optional[str]]
    dedicated: typing.FrozenSet[str]
    mb_value: typing.Optional[int]
    # Derived from tid_group once (intents are reused from tick to tick):
    # the desired groups, and (tid, group) in thread id order.
    wanted: typing.FrozenSet[typing.Optional[str]] = frozenset()
    tid_items: typing.Tuple[typing.Any, ...] = ()


def _intent(inst, threads, caps, settings):
    vcpu_group = {}
    for alloc in inst.allocations:
        for vcpu in alloc.vcpus:
            vcpu_group.setdefault(vcpu, alloc.group)
    agent_group = None
    mb_value = None
    bw = inst.bandwidth
    if bw is not None and caps.mb is not None and bw.group != model.LIBVIRT:
        mb_value = expected_mb(caps, bw.value) if (
            bw.unit == info.UNIT_PERCENT) else bw.value
        if not inst.allocations:
            if bw.group == model.SHARED and bw.unit == info.UNIT_PERCENT:
                agent_group = _shared_group(settings.prefix, mb_value)
            else:
                agent_group = _instance_group(settings.prefix, inst.uuid)
    tid_group = {}
    if threads is not None:
        for vcpu, tid in threads.vcpus.items():
            tid_group[tid] = vcpu_group.get(vcpu, agent_group)
        if settings.place_extra and threads.vcpus:
            group = vcpu_group.get(min(threads.vcpus), agent_group)
            for tid in threads.others:
                tid_group.setdefault(tid, group)
    dedicated = {a.group for a in inst.allocations}
    if agent_group is not None and _parse(
            settings.prefix, agent_group)[0] == 'instance':
        dedicated.add(agent_group)
    return _Intent(inst, threads, agent_group, tid_group,
                   frozenset(dedicated), mb_value,
                   frozenset(tid_group.values()),
                   tuple(sorted(tid_group.items())))


# {uuid: (inst, threads, caps, settings, _Intent)} of the last call.
# _intent() is a pure function of immutable objects, and a converged host
# passes the same ones tick after tick (the thread listing reuses its
# Threads when nothing changed): compared by identity, a hit costs a few
# pointer comparisons instead of a walk over every vCPU.
_intent_memo = {}


# (uuid, group, mon group) -> Placement: the placement of a monitored
# instance depends on nothing else, and Placements are immutable, so a
# converged host gets the same objects tick after tick.
_monitored_memo = {}


def _monitored(uuid, group, mon):
    key = (uuid, group, mon)
    found = _monitored_memo.get(key)
    if found is None:
        if len(_monitored_memo) >= 65536:
            _monitored_memo.clear()
        found = _monitored_memo[key] = model.Placement(
            uuid=uuid, group=group, mon_group=mon, counters=(group, mon),
            wants_mon_group=True)
    return found


def _intents(instances, threads, caps, settings):
    global _intent_memo
    memo, fresh = _intent_memo, {}
    out = []
    for uuid, inst in sorted(instances.items()):
        thr = threads.get(uuid)
        hit = memo.get(uuid)
        if hit is not None and hit[0] is inst and hit[1] is thr and (
                hit[2] is caps and hit[3] is settings):
            it = hit[4]
        else:
            it = _intent(inst, thr, caps, settings)
        fresh[uuid] = (inst, thr, caps, settings, it)
        out.append(it)
    if len(fresh) >= len(memo) or len(instances) > 1:
        # A one-instance call (the fast path) keeps the tick's memo.
        _intent_memo = fresh
    else:
        memo.update(fresh)
    return out


def controllable(inst, caps):
    """True if the bandwidth controller may move ``inst``'s bandwidth.

    Low-priority instances whose bandwidth the agent holds (shared or own
    group, or none yet); never one in a libvirt group.
    """
    bw = inst.bandwidth
    return (inst.priority == LOW and not inst.allocations and
            caps.mb is not None and (
                bw is None or (bw.group != model.LIBVIRT and
                               bw.unit == caps.mb.unit)))


def controlled(instances, levels, caps):
    """``instances`` with the bandwidth controller's levels in force.

    A level (in the host's MBA unit) below an instance's static cap
    replaces that cap: a percentage puts the instance in the shared group
    of that percentage, an MBps or AMD value in its own group. The static
    cap stays the ceiling: a level above it changes nothing.

    :param levels: ``{uuid: level}``.
    """
    if not levels or caps is None or caps.mb is None:
        return instances
    out = dict(instances)
    shared = caps.mb.unit == info.UNIT_PERCENT
    for uuid, level in levels.items():
        inst = instances.get(uuid)
        if inst is None or not controllable(inst, caps):
            continue
        bw = inst.bandwidth
        if bw is not None and bw.value <= level:
            continue
        out[uuid] = dataclasses.replace(inst, bandwidth=model.BandwidthPolicy(
            unit=caps.mb.unit, value=level,
            requested=bw.requested if bw is not None else level,
            group=model.SHARED if shared else model.INSTANCE))
    return out


def groups_of(inst, caps, settings):
    """Names of the control groups ``inst`` should be in."""
    it = _intent(inst, None, caps, settings)
    names = {a.group for a in inst.allocations}
    if it.agent_group is not None:
        names.add(it.agent_group)
    return names


def cleanup(uuid, inst, snapshot, caps, settings, remaining):
    """Remove what a stopped instance leaves behind, without libvirt.

    Its monitoring group goes if it holds no thread any more; its agent
    control group goes if no remaining instance needs it and it is empty.
    Anything that still holds threads stays for the next full tick, which
    knows every instance on the host.

    :param snapshot: a snapshot of (at least) the instance's groups.
    :param remaining: ``{uuid: Instance}`` of the instances still running.
    :returns: ``(actions, warnings)``.
    """
    actions, warnings = [], []
    mon = _mon_group(settings.prefix, uuid)
    for name, group in sorted(snapshot.groups.items(),
                              key=lambda kv: kv[0] or ''):
        if mon not in group.mon_names:
            continue
        if group.mon_groups.get(mon):
            warnings.append('monitoring group %s still holds threads' % mon)
        else:
            actions.append(model.RemoveMonGroup(name, mon))
    needed = set()
    for other in remaining.values():
        needed |= groups_of(other, caps, settings)
    for name in sorted(groups_of(inst, caps, settings) - needed):
        kind = _parse(settings.prefix, name)
        group = snapshot.groups.get(name)
        if group is None or not kind or kind[0] not in ('shared',
                                                        'instance'):
            continue
        if group.tasks:
            warnings.append('control group %s still holds threads' % name)
        else:
            actions.append(model.RemoveGroup(name))
    return actions, warnings


def mon_candidates(instances, threads, caps, settings):
    """Uuids of the instances that need a monitoring group (an RMID).

    These are the monitored instances whose threads share a control group
    with others (a shared group or the default group); the rotation picks
    which of them get one when RMIDs are short.
    """
    if caps.monitor is None:
        return []
    found = []
    for it in _intents(instances, threads, caps, settings):
        if not it.inst.monitor or not it.tid_group:
            continue
        wanted = it.wanted
        if len(wanted) == 1 and not (wanted & it.dedicated):
            found.append(it.inst.uuid)
    return found


def candidate_parents(instances, candidates, caps, settings):
    """How many control groups hold the monitoring ``candidates``.

    On Arm MPAM each control group has its own pool of RMIDs, so the
    budget is per control group (:func:`~rdt_virt.agent.rotation.
    rmid_budget`); the default group counts as one.
    """
    parents = set()
    for uuid in candidates:
        inst = instances.get(uuid)
        if inst is not None:
            names = groups_of(inst, caps, settings)
            parents.add(min(names) if names else None)
    return len(parents)


# The plan --------------------------------------------------------------------

class _Planner(object):

    def __init__(self, snapshot, caps, settings, window, blocked,
                 draining=()):
        self.snap = snapshot
        self.caps = caps
        self.settings = settings
        self.prefix = settings.prefix
        self.window = window
        self.blocked = dict(blocked or {})
        self.draining = frozenset(draining or ())
        self.where = snapshot.where()
        self.warnings = []
        self.repairs = []
        self.needs_full = False
        self.creates = []           # CreateGroup + WriteSchemata
        self.fixes = []
        # (group, MB value) -> the fix of an existing agent group, or None:
        # every instance of a shared group asks for the same schemata.
        self._group_fix = {}
        self.mon_moves = []
        self.ctrl_assign = {}       # group -> [tids]
        self.mon_removes = []
        self.mon_creates = []
        self.mon_assign = {}        # (group, mon) -> [tids]
        self.group_removes = []
        self.available = set(snapshot.groups)
        self.uuid_of = {}           # group -> uuid for dedicated groups

    def owns(self, name):
        return name is not None and name.startswith(self.prefix)

    # Control groups -------------------------------------------------------

    def root(self):
        root = self.snap.groups[ROOT]
        desired = default_masks(self.caps, self.settings.default_l3_ways)
        actions = []
        if desired and root.schemata is not None:
            update = masks.diff(root.schemata, desired)
            if update:
                actions.append(model.WriteSchemata(
                    ROOT, schemata_mod.format(update)))
        self.effective_root = schemata_mod.merge(root.schemata or {},
                                                 desired)
        return actions

    def used_masks(self):
        used = {}
        for name, group in self.snap.groups.items():
            sch = self.effective_root if name is ROOT else group.schemata
            for res, doms in masks.cache_lines(sch).items():
                for dom, mask in doms.items():
                    used.setdefault(res, {})[dom] = used.get(
                        res, {}).get(dom, 0) | mask
        return used

    def ensure_group(self, name, desired, uuid=None):
        """Create or fix one of the agent's control groups."""
        group = self.snap.groups.get(name)
        if group is not None:
            update = masks.diff(group.schemata, desired, self.caps)
            fix = model.WriteSchemata(name, schemata_mod.format(update))
            # Each instance of a shared group asks: write it once.
            if update and group.schemata is not None and (
                    fix not in self.fixes):
                self.fixes.append(fix)
            return
        if name in self.blocked or name in self.available:
            return
        self.available.add(name)
        self.creates.append(model.CreateGroup(name, uuid=uuid))
        self.creates.append(model.WriteSchemata(
            name, schemata_mod.format(desired)))

    def ensure_agent_group(self, it):
        """:meth:`ensure_group` for the agent group of intent *it*."""
        name = it.agent_group
        uuid = it.inst.uuid if name in it.dedicated else None
        if name not in self.snap.groups:
            self.ensure_group(name, self.agent_schemata(it.mb_value),
                              uuid=uuid)
            return
        key = (name, it.mb_value)
        if key in self._group_fix:
            fix = self._group_fix[key]
        else:
            before = len(self.fixes)
            self.ensure_group(name, self.agent_schemata(it.mb_value),
                              uuid=uuid)
            fix = self.fixes.pop() if len(self.fixes) > before else None
            self._group_fix[key] = fix
        if fix is not None and fix not in self.fixes:
            # Written once per group, as ensure_group() does.
            self.fixes.append(fix)

    def agent_schemata(self, mb_value):
        desired = masks.cache_lines(self.effective_root)
        if mb_value is not None and self.caps.mb is not None:
            desired['MB'] = {dom: mb_value
                             for dom in self.caps.mb.domain_ids}
        return desired

    def alloc_mb(self, it, alloc):
        if alloc.bandwidth:
            return {dom: expected_mb(self.caps, v)
                    for dom, v in alloc.bandwidth.items()}
        if it.mb_value is not None and self.caps.mb is not None:
            return {dom: it.mb_value for dom in self.caps.mb.domain_ids}
        return {}

    def ensure_alloc(self, it, alloc, used):
        mb = self.alloc_mb(it, alloc)
        group = self.snap.groups.get(alloc.group)
        if group is not None:
            update = masks.diff(group.schemata, {'MB': mb} if mb else {},
                                self.caps)
            if update and group.schemata is not None:
                self.fixes.append(model.WriteSchemata(
                    alloc.group, schemata_mod.format(update)))
            return
        if alloc.group in self.blocked or alloc.group in self.available:
            return
        if not self.snap.complete:
            self.needs_full = True
            return
        try:
            carved = masks.carve(alloc, self.caps, used)
        except masks.NoRoom as e:
            self.warnings.append('cannot restore libvirt group %s of %s: %s'
                                 % (alloc.group, it.inst.uuid, e))
            return
        desired = schemata_mod.merge(self.effective_root, carved)
        if mb:
            desired = schemata_mod.merge(desired, {'MB': mb})
        self.available.add(alloc.group)
        self.creates.append(model.CreateGroup(alloc.group, libvirt=True,
                                              uuid=it.inst.uuid))
        self.creates.append(model.WriteSchemata(
            alloc.group, schemata_mod.format(desired)))

    # Threads --------------------------------------------------------------

    def place_threads(self, it):
        """Move threads to their control groups; return their final ones."""
        final = {}
        allocs = {a.group for a in it.inst.allocations}
        # Groups that already hold threads of this instance: a thread away
        # from one of them was moved, not yet placed. Needed only for a
        # move, and computed at the first one, before the loop has
        # changed where any of the instance's threads are.
        placed = None
        for tid, group in it.tid_items:
            current = self.where.get(tid, (ROOT, None))[0]
            target = current
            stale = current is not ROOT and current != group and (
                self.owns(current) or (is_libvirt_group(current) and
                                       current not in allocs))
            if group is not ROOT and group in self.available:
                target = group
            elif stale:
                # A stale agent or libvirt group applies someone else's
                # policy: back to the default group, also while the
                # kernel refuses the instance's own group.
                target = ROOT
            if target != current:
                if placed is None:
                    placed = {self.where.get(t, (ROOT, None))[0]
                              for t in it.tid_group}
                self.ctrl_assign.setdefault(target, []).append(tid)
                self.where[tid] = (target, None)
                # libvirt places vCPUs in their group before they run, and
                # the agent placed the others: a thread elsewhere than its
                # siblings, or than its libvirt group, was moved by hand.
                if target is not ROOT and (current is not ROOT or
                                           target in placed or
                                           target in allocs):
                    self.repairs.append(Repair(it.inst.uuid, tid, current,
                                               target))
            final[tid] = target
        return final

    def monitor(self, it, final):
        """Decide how the instance is monitored; returns a Placement."""
        uuid = it.inst.uuid
        groups = set(final.values())
        group = self._group_of_first_vcpu(it, final)
        place = dict(uuid=uuid, group=group)
        if not it.inst.monitor:
            return model.Placement(reason=R_DISABLED, **place)
        if self.caps.monitor is None:
            return model.Placement(reason=R_NO_MON, **place)
        if not groups:
            return model.Placement(reason=R_NO_PROCESS, **place)
        if len(groups) != 1:
            return model.Placement(reason=R_SPLIT, **place)
        if group in it.dedicated:
            return model.Placement(counters=(group, None), **place)
        if not (group is ROOT or self.owns(group)):
            return model.Placement(reason=R_FOREIGN % group, **place)
        wanted = it.wanted
        if wanted != groups:
            # Its group is still to be made (or refused by the kernel).
            missing = next(iter(wanted - groups))
            return model.Placement(
                reason=self.blocked.get(missing, R_PENDING), **place)
        mon = _mon_group(self.prefix, uuid)
        place['wants_mon_group'] = True
        if self.window is not None and uuid not in self.window:
            return model.Placement(reason=R_ROTATED, **place)
        if mon in self.blocked:
            return model.Placement(reason=self.blocked[mon], **place)
        self.desired_mons[mon] = (group, uuid, frozenset(final))
        return _monitored(uuid, group, mon)

    @staticmethod
    def _group_of_first_vcpu(it, final):
        if it.threads and it.threads.vcpus:
            tid = it.threads.vcpus[min(it.threads.vcpus)]
            return final.get(tid)
        return None

    # Monitoring groups ----------------------------------------------------

    def existing_mons(self):
        found = {}
        for name, group in self.snap.groups.items():
            for mon in group.mon_names:
                kind = _parse(self.prefix, mon)
                if kind and kind[0] == 'monitor':
                    found.setdefault(mon, []).append(name)
        return found

    def _move_mon(self, mon, old, group):
        tids = tuple(sorted(tid for tid, loc in self.where.items()
                            if loc == (old, mon)))
        self.mon_moves.append(model.MoveMonGroup(
            mon, old, group, tids, uuid=_parse(self.prefix, mon)[1]))
        for tid in tids:
            self.where[tid] = (group, mon)

    def premove(self, it):
        """Move an instance's monitoring group along with it.

        Done before its threads move: renaming the group to the new parent
        takes its threads there and keeps the counters, where moving the
        threads first would empty it.
        """
        wanted = it.wanted
        if len(wanted) != 1 or not it.inst.monitor or (
                self.caps.monitor is None):
            return
        group = next(iter(wanted))
        if group in it.dedicated or group not in self.available or not (
                group is ROOT or self.owns(group)):
            return
        uuid = it.inst.uuid
        mon = _mon_group(self.prefix, uuid)
        if (self.window is not None and uuid not in self.window) or (
                mon in self.blocked):
            return
        parents = self.existing.get(mon, [])
        if parents and group not in parents:
            old = parents.pop(0)
            self._move_mon(mon, old, group)
            parents.append(group)

    def limit_pools(self, placements):
        """Keep each control group's monitoring groups within its pool.

        On MPAM an RMID is a PMG of one CLOSID and ``alloc_rmid(closid)``
        answers ENOSPC once that CLOSID's PMGs are taken, whatever the
        rest of the host has free. Groups that exist (or move in) keep
        their place; new ones join in uuid order while room is left.
        Monitoring groups of other tools and those still draining hold a
        PMG of the group too.
        """
        per_group = self.caps.mon_groups_per_closid
        if per_group is None:
            return
        wanted = {}
        for mon, (group, _uuid, _tids) in self.desired_mons.items():
            wanted.setdefault(group, []).append(mon)
        for group, mons in sorted(wanted.items(),
                                  key=lambda kv: (kv[0] is not None,
                                                  kv[0] or '')):
            snap_group = self.snap.groups.get(group)
            held = 0
            for name in (snap_group.mon_names if snap_group else ()):
                kind = _parse(self.prefix, name)
                if not (kind and kind[0] == 'monitor') or (
                        name in self.draining):
                    held += 1
            room = max(per_group - held, 0)

            def present(mon, group=group):
                return group in self.existing.get(mon, ())
            for mon in sorted(mons, key=lambda m: (not present(m), m))[room:]:
                _group, uuid, _tids = self.desired_mons.pop(mon)
                placements[uuid] = dataclasses.replace(
                    placements[uuid], mon_group=None, counters=None,
                    reason=R_POOL % (group or 'default', per_group))

    def mon_groups(self, managed):
        existing = self.existing
        for mon, (group, uuid, tids) in sorted(self.desired_mons.items()):
            parents = existing.pop(mon, [])
            if group in parents:
                parents.remove(group)
            elif parents:
                self._move_mon(mon, parents.pop(0), group)
            else:
                self.mon_creates.append(model.CreateMonGroup(group, mon,
                                                             uuid=uuid))
            for parent in parents:
                existing.setdefault(mon, []).append(parent)
            for tid in sorted(tids):
                loc = self.where.get(tid, (ROOT, None))
                if loc[0] == group and loc[1] != mon:
                    self.mon_assign.setdefault((group, mon), []).append(tid)
                    self.where[tid] = (group, mon)
        for mon, parents in sorted(existing.items(),
                                   key=lambda kv: kv[0]):
            for parent in parents:
                if not self.snap.complete:
                    continue
                tasks = self.snap.groups[parent].mon_groups.get(
                    mon, frozenset())
                if tasks - managed:
                    self.warnings.append(
                        'keeping monitoring group %s: it holds threads of '
                        'no managed instance' % mon)
                    continue
                if mon in self.draining:
                    # Its RMID's cache occupancy is still above the
                    # threshold: removing it would leave the RMID in limbo
                    # for who knows how long. The threads go back to the
                    # control group; the group waits until it drains.
                    tids = sorted(tid for tid, loc in self.where.items()
                                  if loc == (parent, mon))
                    if tids:
                        self.ctrl_assign.setdefault(parent, []).extend(tids)
                        for tid in tids:
                            self.where[tid] = (parent, None)
                    continue
                self.mon_removes.append(model.RemoveMonGroup(parent, mon))
                for tid, loc in list(self.where.items()):
                    if loc == (parent, mon):
                        self.where[tid] = (parent, None)

    def remove_unused(self, needed, managed):
        if not self.snap.complete:
            return
        for name in sorted(n for n in self.snap.groups if n is not ROOT):
            kind = _parse(self.prefix, name)
            if not kind or kind[0] not in ('shared', 'instance') or (
                    name in needed):
                continue
            left = {tid for tid, loc in self.where.items()
                    if loc[0] == name}
            left |= set(self.snap.groups[name].tasks) - set(self.where)
            if left - managed:
                self.warnings.append(
                    'keeping control group %s: it holds threads of no '
                    'managed instance' % name)
                continue
            self.group_removes.append(model.RemoveGroup(name))

    # Assembly -------------------------------------------------------------

    def actions(self, root_actions):
        out = list(root_actions) + self.creates + self.fixes
        out += self.mon_moves
        for group in sorted(self.ctrl_assign, key=lambda g: (
                g is not None, g or '')):
            out.append(model.AssignTasks(group, None,
                                         tuple(self.ctrl_assign[group])))
        out += self.mon_removes + self.mon_creates
        for (group, mon) in sorted(self.mon_assign, key=lambda k: k[1]):
            out.append(model.AssignTasks(
                group, mon, tuple(self.mon_assign[(group, mon)]),
                uuid=_parse(self.prefix, mon)[1]))
        return out + self.group_removes


def plan(instances, threads, snapshot, caps, settings, window=None,
         blocked=None, draining=()):
    """Turn desired and actual state into actions.

    :param instances: ``{uuid: Instance}`` of the running domains Nova owns
        (all of them for a complete snapshot).
    :param threads: ``{uuid: Threads}``; an instance without an entry has
        no known QEMU process yet and is left as it is.
    :param snapshot: a :class:`~rdt_virt.agent.model.Snapshot`.
    :param caps: the host's HostCapabilities.
    :param settings: :class:`Settings`.
    :param window: uuids allowed a monitoring group (None: all).
    :param blocked: ``{group name: reason}`` of groups not to create now.
    :param draining: names of monitoring groups no longer wanted whose
        RMID has not drained yet (see :mod:`rdt_virt.agent.rotation`):
        emptied, not removed.
    :returns: a :class:`Result`.
    """
    if ROOT not in snapshot.groups:
        return Result([], {}, ['resctrl is not mounted'])
    planner = _Planner(snapshot, caps, settings, window, blocked, draining)
    planner.desired_mons = {}
    root_actions = planner.root()
    intents = _intents(instances, threads, caps, settings)
    managed = set()
    needed = set()
    for it in intents:
        if it.threads is not None:
            managed |= it.threads.all
        if it.agent_group is not None:
            needed.add(it.agent_group)
    aliases = levelgroups.stand_ins(
        snapshot, caps, settings.prefix, planner.blocked,
        [(it.agent_group, set(it.tid_group)) for it in intents
         if it.threads is not None], needed)
    for i, it in enumerate(intents):
        if it.agent_group in aliases:
            # A new intent: _intents() keeps the old one for later calls.
            needed.discard(it.agent_group)
            tid_group = {t: aliases.get(g, g)
                         for t, g in it.tid_group.items()}
            it = intents[i] = dataclasses.replace(
                it, agent_group=aliases[it.agent_group], tid_group=tid_group,
                wanted=frozenset(tid_group.values()),
                tid_items=tuple(sorted(tid_group.items())))
            needed.add(it.agent_group)
    used = planner.used_masks() if snapshot.complete else {}
    for it in intents:
        if it.threads is None:
            continue
        if it.agent_group is not None:
            planner.ensure_agent_group(it)
        for alloc in it.inst.allocations:
            planner.ensure_alloc(it, alloc, used)
    planner.existing = planner.existing_mons()
    placements = {}
    for it in intents:
        if it.threads is None:
            placements[it.inst.uuid] = model.Placement(
                it.inst.uuid, it.agent_group, reason=R_NO_PROCESS)
            # Its QEMU is not found (yet): keep its monitoring group.
            planner.existing.pop(
                _mon_group(settings.prefix, it.inst.uuid), None)
            continue
        planner.premove(it)
        final = planner.place_threads(it)
        placements[it.inst.uuid] = planner.monitor(it, final)
    planner.limit_pools(placements)
    planner.mon_groups(managed)
    planner.remove_unused(needed, managed)
    return Result(planner.actions(root_actions), placements,
                  planner.warnings, planner.needs_full, planner.repairs)
