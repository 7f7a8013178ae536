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


"""The bandwidth controller in the agent: its inputs, state and log.

:mod:`rdt_virt.agent.controller` decides; this module feeds it what the
last sample measured, keeps its :class:`~rdt_virt.agent.controller.State`
between samples, logs every change with its reason and gives the planner
(:func:`rdt_virt.agent.reconcile.plan`) the levels to put in force. A level
is a value in the host's MBA unit: on percent hosts the low instance joins
the agent's shared group of that percentage (``rdtvirt-mb<N>``), on
``mba_MBps`` (and AMD) hosts the agent's own group of the instance gets
that value. The controller never moves an instance that libvirt's groups
hold, nor anything in other tools' groups.

The controller works per memory bandwidth pool
(:mod:`rdt_virt.agent.pools`): this module sums each instance's per-domain
rates over the pool's L3 domains, and the controller's "domains" are the
pools, each named by its lowest domain id. Until the agent has read the
host's topology, and with ``controller_pools = domain``, every domain is a
pool of its own. When the pools change (the topology was read, or the
option changed), each pool starts afresh as after a restart.

The agent stopping leaves the levels in force (the groups stay as they
are); a restarted agent takes them back from the state file, and its
pools start a new dwell, so a restart causes no burst of releases.
"""

import dataclasses
import time

from oslo_log import log as logging

from rdt_virt.agent import controller as ctl
from rdt_virt.agent import model
from rdt_virt.agent import pools as pools_mod
from rdt_virt.agent import reconcile
from rdt_virt.agent import sampler
from rdt_virt.agent import state as state_mod
from rdt_virt import exception
from rdt_virt.policy import fit
from rdt_virt.resctrl import info

LOG = logging.getLogger(__name__)
GB = 10 ** 9


def params_from(opts, period):
    """:class:`~rdt_virt.agent.controller.Params` from ``[rdt_agent]``."""
    throttle = opts.controller_throttle_dwell
    release = opts.controller_release_dwell
    return ctl.Params(
        high_watermark=opts.controller_high_watermark,
        low_watermark=min(opts.controller_low_watermark,
                          opts.controller_high_watermark),
        decrease=opts.controller_decrease,
        increase=opts.controller_increase,
        throttle_dwell=period if throttle is None else throttle,
        release_dwell=3 * period if release is None else release,
        floor=opts.controller_floor,
        active_threshold=opts.controller_active_threshold * ctl.MB,
        learn_samples=opts.controller_learn_samples)


def scale_of(caps, max_levels=None, existing=frozenset()):
    """The controller's :class:`~rdt_virt.agent.controller.Scale`."""
    mb = caps.mb
    per_unit = {info.UNIT_MBPS: ctl.MB,
                info.UNIT_AMD: fit.AMD_MBPS_PER_UNIT * ctl.MB}.get(mb.unit)
    return ctl.Scale(unit=mb.unit, maximum=mb.max_bandwidth,
                     minimum=max(mb.min_bandwidth, 1),
                     step=mb.bandwidth_gran if per_unit is None else 1,
                     bytes_per_unit=per_unit,
                     max_levels=max_levels if per_unit is None else None,
                     existing=frozenset(existing) if per_unit is None
                     else frozenset())


def static_levels(instances, levels, caps):
    """Percentages of the shared groups that static caps keep in use.

    A level the controller picks among them takes no CLOSID of its own.
    Instances the controller holds are left out: their static group may
    be gone.
    """
    if caps.mb is None or caps.mb.unit != info.UNIT_PERCENT:
        return frozenset()
    return frozenset(
        reconcile.expected_mb(caps, inst.bandwidth.value)
        for uuid, inst in instances.items()
        if uuid not in levels and inst.bandwidth is not None and
        inst.bandwidth.group == model.SHARED and
        inst.bandwidth.unit == info.UNIT_PERCENT)


class Demand(object):
    """CPUs each instance's vCPU threads were runnable between readings.

    A reading is ``{uuid: {tid: nanoseconds run or waited}}``
    (:meth:`rdt_virt.agent.procfs.ProcFS.runnable_ns`); threads present in
    both readings count, so a vCPU that came or went costs one interval.
    """

    def __init__(self):
        self._last = {}     # uuid -> ({tid: ns}, time)

    def update(self, readings, now):
        """``{uuid: CPUs, or None}`` since the last update."""
        out = {}
        last, self._last = self._last, {}
        for uuid, ns in (readings or {}).items():
            ns = {t: v for t, v in ns.items() if v is not None}
            self._last[uuid] = (ns, now)
            before, then = last.get(uuid, ({}, None))
            common = set(ns) & set(before)
            if not common or then is None or now <= then:
                out[uuid] = None
                continue
            grown = sum(max(0, ns[t] - before[t]) for t in common)
            out[uuid] = grown / 1e9 / (now - then)
        return out


def ceiling_of(inst):
    """The static cap that the controller's level never exceeds."""
    return inst.bandwidth.value if inst.bandwidth is not None else None


def _role(inst, caps):
    """``(priority, ceiling)`` the controller gives ``inst``; None: none.

    A low instance the controller may not move counts as normal; a normal
    one that is not monitored is left out.
    """
    if inst.priority == ctl.NORMAL and not inst.monitor:
        return None
    priority = inst.priority
    if priority == ctl.LOW and not reconcile.controllable(inst, caps):
        priority = ctl.NORMAL
    return priority, ceiling_of(inst) if priority == ctl.LOW else None


class Protection(object):
    """The controller's state in the agent.

    :param opts: the ``[rdt_agent]`` options.
    :param clock: monotonic seconds.
    """

    def __init__(self, opts, clock):
        self.opts = opts
        self.clock = clock
        self.period = opts.controller_period or opts.sample_interval
        self.params = params_from(opts, self.period)
        self.state = ctl.State()
        self.reports = {}
        # {uuid: MBA value in force} of the low instances, for readers.
        self.limits = {}
        self.unit = None
        self._next = None
        self._resumed_at = None
        self.last_cpu = 0.0
        # {domain: pool} from the host's topology (None: not read yet), and
        # {pool: domains} of the state the controller holds.
        self.pool_of = None
        self._members = {}
        self.demand = Demand()
        # {uuid: (Instance, caps, role)}: an instance's role depends on
        # nothing else, and those are the same objects period after period.
        self._roles = {}
        # {uuid: runnable CPUs} of the high instances in the last period.
        self.demands = {}

    def set_pools(self, pool_of):
        """The host's pools (:func:`rdt_virt.agent.pools.pools`)."""
        self.pool_of = dict(pool_of) if pool_of is not None else None

    def _pools(self, caps):
        """``{domain: pool}`` in force for this host's domains."""
        domains = set(caps.mb.domain_ids) | set(caps.monitor.domain_ids)
        known = self.pool_of if (
            self.opts.controller_pools == pools_mod.NUMA and
            self.pool_of) else {}
        return {d: known.get(d, d) for d in domains}

    def _regroup(self, members, now):
        """Start afresh the pools whose domains changed (see module)."""
        if members == self._members:
            return
        old = self.state.domains
        domains = {}
        for pool, doms in members.items():
            if self._members.get(pool) == doms:
                domains[pool] = old.get(pool, ctl.Domain())
            elif pool in old:
                # Other domains than its memory covers: begin as after a
                # restart, with a dwell and nothing learned.
                domains[pool] = ctl.Domain(last_change=now)
            else:
                domains[pool] = ctl.Domain()
        if self._members or any(len(d) > 1 for d in members.values()):
            LOG.info('Bandwidth controller pools: %s',
                     '; '.join('%d: domains %s' % (
                         p, ','.join(str(d) for d in doms))
                         for p, doms in sorted(members.items())))
        # Where each instance ran is in the old pools' terms: forget it.
        self.state = ctl.State(self.state.levels, domains,
                               peaks=self.state.peaks)
        self._members = members

    @property
    def levels(self):
        """``{uuid: level}`` for the planner."""
        return self.state.levels if self.opts.controller_enabled else {}

    def resume_file(self, path):
        """:meth:`resume` from the state file at ``path``.

        A file this agent cannot read whole (another version of the
        document, from an rdt-virt one release older or newer) is not
        taken in part: the controller starts afresh, and says so, since
        that releases the instances it held before the restart.
        """
        try:
            doc = state_mod.load(path)
        except FileNotFoundError:
            return
        except (OSError, exception.InvalidStateFile) as e:
            if self.opts.controller_enabled:
                LOG.warning('Bandwidth controller starts afresh, without '
                            'the levels it held before the restart: %s',
                            e)
            return
        self.resume(doc)

    def resume(self, doc, instances=None):
        """Take the levels back from a state document after a restart.

        Each domain starts a dwell now: nothing is released before the
        controller has measured for ``release_dwell`` seconds.
        """
        if not doc or not self.opts.controller_enabled:
            return
        levels = {}
        for uuid, entry in (doc.get('instances') or {}).items():
            if not isinstance(entry, dict):
                continue
            level = entry.get('level')
            if entry.get('priority') == ctl.LOW and isinstance(
                    level, int) and not isinstance(level, bool) and (
                    level > 0):
                levels[uuid] = level
        now = self.clock()
        host = doc.get('host') or {}
        part = host.get('controller') if isinstance(host, dict) else None
        part = part.get('domains') if isinstance(part, dict) else None
        domains, members = {}, {}
        for dom, entry in (part if isinstance(part, dict) else {}).items():
            try:
                dom = int(dom)
            except ValueError:
                continue
            entry = entry if isinstance(entry, dict) else {}
            learned = entry.get('learned_bps')
            domains[dom] = ctl.Domain(
                last_change=now,
                learned=learned if isinstance(learned, (int, float)) and (
                    learned > 0) else 0.0,
                given=_given(entry.get('given')),
                undo={u: v for u, v in _dict(entry.get('undo')).items()
                      if _level_value(v)},
                stopped=entry.get('stopped') is True)
            # A document without the pool's domains: one domain each.
            doms = entry.get('members', [dom])
            members[dom] = tuple(sorted(d for d in doms if isinstance(
                d, int) and not isinstance(d, bool))) if isinstance(
                doms, list) else ()
        self.state = ctl.State(levels, domains)
        self._members = members
        # Domains the document did not name start their dwell now too.
        self._resumed_at = now
        if levels:
            LOG.info('Bandwidth controller resumes %d throttled instances '
                     'from the state file', len(levels))

    def due(self, now):
        return self._next is None or now >= self._next - 0.1 * self.period

    def step(self, caps, instances, rates, closids_used=0, runnable=None,
             slot=None):
        """Decide after a sample; returns the changes (a tuple).

        :param runnable: ``{uuid: {vCPU tid: nanoseconds run or waited}}``
            read now, of the high-priority instances (see :class:`Demand`).
        :param slot: the time of the agent's sampling clock this sample
            stands for (:func:`rdt_virt.agent.service.next_slot`). Periods
            and dwells count on it: samples start on that clock, a late
            one (behind a tick) is followed by a shorter interval, and
            measured on the agent's clock that interval could fall short
            of the period's 10% slack and skip a decision. The demand is
            divided by the real time between its readings. None: the
            agent's clock for both.
        """
        if caps is None or caps.mb is None or caps.monitor is None:
            return ()
        read_at = self.clock()
        now = read_at if slot is None else slot
        if not self.due(now):
            return ()
        cpu0 = time.process_time()
        try:
            return self._step(caps, instances, rates, closids_used, now,
                              runnable, read_at)
        finally:
            self.last_cpu = time.process_time() - cpu0

    def _step(self, caps, instances, rates, closids_used, now, runnable,
              read_at=None):
        self._next = now + self.period
        demand = self.demand.update(
            runnable, now if read_at is None else read_at)
        self.demands = {u: round(d, 3) for u, d in demand.items()
                        if d is not None}
        pool_of = self._pools(caps)
        if self._resumed_at is not None:
            domains = dict(self.state.domains)
            for pool in set(pool_of.values()):
                domains.setdefault(pool, ctl.Domain(
                    last_change=self._resumed_at))
            self.state = dataclasses.replace(self.state, domains=domains)
            self._members.update(
                (p, doms) for p, doms in pools_mod.members(pool_of).items()
                if p not in self._members)
            self._resumed_at = None
        self._regroup(pools_mod.members(pool_of), now)
        members = []
        roles, fresh = self._roles, {}
        merge, no_traffic = pools_mod.merge, sampler.R_NO_TRAFFIC
        for uuid, inst in sorted(instances.items()):
            known = roles.get(uuid)
            if known is None or known[0] is not inst or known[1] is not caps:
                known = (inst, caps, _role(inst, caps))
            fresh[uuid] = known
            role = known[2]
            if role is None:
                continue
            priority, ceiling = role
            rate = rates.get(uuid)
            by_domain = merge(
                rate.total_by_domain if rate is not None else None, pool_of)
            if rate is not None and rate.reason == no_traffic:
                # Its threads have not run since its counters started: it
                # moved nothing, which is a measurement. Taken as missing,
                # a guest paused from its boot held every release.
                by_domain = {}
            # _make(): the named tuple's own constructor takes its
            # arguments one by one at twice the cost, per instance.
            members.append(ctl.Member._make((
                uuid, priority, ceiling, by_domain, inst.monitor,
                demand.get(uuid) if priority == ctl.HIGH else None)))
        self._roles = fresh
        capacity = self.opts.memory_bandwidth_capacity * GB
        capacities = {p: capacity for p in set(pool_of.values())} if (
            capacity) else {}
        in_use = len(set(self.state.levels.values()))
        # No floor of one: without a free CLOSID only the levels there
        # are, or a level changed in place, remain (controller.decide).
        scale = scale_of(caps, max(0, caps.num_closids - closids_used +
                                   in_use),
                         static_levels(instances, self.state.levels, caps))
        self.unit = scale.unit
        if not self.opts.controller_enabled:
            self.state = ctl.State()
            self.limits = {}
            return ()
        decision = ctl.decide(members, self.state, scale, self.params, now,
                              capacities)
        self.state = decision.state
        self.reports = decision.reports
        levels, low, in_force = self.state.levels, ctl.LOW, ctl.in_force
        self.limits = {m.uuid: in_force(m, levels, scale)
                       for m in members if m.priority == low}
        # The arguments cost more than the test when INFO is off.
        for c in decision.changes if LOG.isEnabledFor(logging.INFO) else ():
            report = decision.reports[c.domain]
            LOG.info('Bandwidth controller: domain %s, pressure %s, '
                     'capacity %s (%s): instance %s level %s -> %s (%s)',
                     _pool_name(c.domain, self._members),
                     _fmt(report.pressure, '%.2f'),
                     _fmt(report.capacity and report.capacity / GB,
                          '%.1f GB/s'), report.capacity_source or 'unknown',
                     c.uuid, _level(c.old, scale.unit),
                     _level(c.new, scale.unit), c.reason)
        return decision.changes

    def host_doc(self):
        """The ``controller`` part of the state file's host object."""
        domains = {}
        for dom, r in sorted(self.reports.items()):
            memory = self.state.domains.get(dom)
            domains[str(dom)] = {
                'members': list(self._members.get(dom, (dom,))),
                'pressure': None if r.pressure is None else round(
                    r.pressure, 4),
                'capacity_bps': r.capacity,
                'capacity_source': r.capacity_source,
                'learned_bps': memory.learned if memory else None,
                'total_bps': round(r.total, 3),
                'throttled': r.throttled,
                'active_high': r.active_high,
                'active_low': r.active_low,
                'low_at_floor': r.low_at_floor,
                'starved_high': r.starved_high,
                'decision': r.decision,
                'reason': r.reason,
                # What a restarted agent needs to go on where this one is
                # (a release stopped, and what protection gave).
                'stopped': bool(memory and memory.stopped),
                'given': {u: list(g) for u, g in sorted(
                    (memory.given if memory else {}).items())},
                'undo': dict(sorted((memory.undo if memory else {}).items())),
            }
        return {'enabled': bool(self.opts.controller_enabled),
                'unit': self.unit, 'period': self.period,
                'high_watermark': self.params.high_watermark,
                'domains': domains, 'demand': dict(sorted(
                    self.demands.items()))}


def _dict(value):
    return value if isinstance(value, dict) else {}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _level_value(value):
    return isinstance(value, int) and not isinstance(value, bool) and (
        value > 0)


def _given(value):
    """``{uuid: (bytes/s, demand or None)}`` from a state document."""
    out = {}
    for uuid, pair in _dict(value).items():
        if isinstance(pair, list) and len(pair) == 2 and _number(
                pair[0]) and (pair[1] is None or _number(pair[1])):
            out[uuid] = (float(pair[0]), pair[1])
    return out


def _pool_name(pool, members):
    doms = members.get(pool, (pool,))
    if len(doms) == 1:
        return '%d' % pool
    return '%d (pool of %s)' % (pool, ','.join(str(d) for d in doms))


def _fmt(value, fmt):
    return 'unknown' if value is None else fmt % value


def _level(value, unit):
    if value is None:
        return 'static'
    return '%d%s' % (value, '%' if unit == info.UNIT_PERCENT else
                     ' ' + unit)
