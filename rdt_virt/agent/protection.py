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

The agent stopping leaves the levels in force (the groups stay as they
are); a restarted agent takes them back from the state file, and its
domains start a new dwell, so a restart causes no burst of releases.
"""

import dataclasses
import time

from oslo_log import log as logging

from rdt_virt.agent import controller as ctl
from rdt_virt.agent import reconcile
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


def scale_of(caps, max_levels=None):
    """The controller's :class:`~rdt_virt.agent.controller.Scale`."""
    mb = caps.mb
    per_unit = {info.UNIT_MBPS: ctl.MB,
                info.UNIT_AMD: fit.AMD_MBPS_PER_UNIT * ctl.MB}.get(mb.unit)
    return ctl.Scale(unit=mb.unit, maximum=mb.max_bandwidth,
                     minimum=max(mb.min_bandwidth, 1),
                     step=mb.bandwidth_gran if per_unit is None else 1,
                     bytes_per_unit=per_unit,
                     max_levels=max_levels if per_unit is None else None)


def ceiling_of(inst):
    """The static cap that the controller's level never exceeds."""
    return inst.bandwidth.value if inst.bandwidth is not None else None


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

    @property
    def levels(self):
        """``{uuid: level}`` for the planner."""
        return self.state.levels if self.opts.controller_enabled else {}

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
        domains = {}
        for dom, entry in (part if isinstance(part, dict) else {}).items():
            try:
                dom = int(dom)
            except ValueError:
                continue
            learned = entry.get('learned_bps') if isinstance(
                entry, dict) else None
            domains[dom] = ctl.Domain(
                last_change=now,
                learned=learned if isinstance(learned, (int, float)) and (
                    learned > 0) else 0.0)
        self.state = ctl.State(levels, domains)
        # Domains the document did not name start their dwell now too.
        self._resumed_at = now
        if levels:
            LOG.info('Bandwidth controller resumes %d throttled instances '
                     'from the state file', len(levels))

    def due(self, now):
        return self._next is None or now >= self._next - 0.1 * self.period

    def step(self, caps, instances, rates, closids_used=0):
        """Decide after a sample; returns the changes (a tuple)."""
        if caps is None or caps.mb is None or caps.monitor is None:
            return ()
        now = self.clock()
        if not self.due(now):
            return ()
        cpu0 = time.process_time()
        try:
            return self._step(caps, instances, rates, closids_used, now)
        finally:
            self.last_cpu = time.process_time() - cpu0

    def _step(self, caps, instances, rates, closids_used, now):
        self._next = now + self.period
        if self._resumed_at is not None:
            domains = dict(self.state.domains)
            for dom in set(caps.mb.domain_ids) | set(
                    caps.monitor.domain_ids):
                domains.setdefault(dom, ctl.Domain(
                    last_change=self._resumed_at))
            self.state = dataclasses.replace(self.state, domains=domains)
            self._resumed_at = None
        members = []
        for uuid, inst in sorted(instances.items()):
            if inst.priority == ctl.NORMAL and not inst.monitor:
                continue
            rate = rates.get(uuid)
            by_domain = rate.total_by_domain if rate is not None else None
            priority = inst.priority
            if priority == ctl.LOW and not reconcile.controllable(inst,
                                                                  caps):
                priority = ctl.NORMAL
            members.append(ctl.Member(
                uuid, priority,
                ceiling=ceiling_of(inst) if priority == ctl.LOW else None,
                domains=by_domain, monitored=inst.monitor))
        capacity = self.opts.memory_bandwidth_capacity * GB
        capacities = {d: capacity for d in caps.mb.domain_ids} if (
            capacity) else {}
        in_use = len(set(self.state.levels.values()))
        scale = scale_of(caps, max(1, caps.num_closids - closids_used +
                                   in_use))
        self.unit = scale.unit
        if not self.opts.controller_enabled:
            self.state = ctl.State()
            self.limits = {}
            return ()
        decision = ctl.decide(members, self.state, scale, self.params, now,
                              capacities)
        self.state = decision.state
        self.reports = decision.reports
        self.limits = {m.uuid: ctl.in_force(m, self.state.levels, scale)
                       for m in members if m.priority == ctl.LOW}
        for c in decision.changes:
            report = decision.reports[c.domain]
            LOG.info('Bandwidth controller: domain %d, pressure %s, '
                     'capacity %s (%s): instance %s level %s -> %s (%s)',
                     c.domain, _fmt(report.pressure, '%.2f'),
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
                'pressure': None if r.pressure is None else round(
                    r.pressure, 4),
                'capacity_bps': r.capacity,
                'capacity_source': r.capacity_source,
                'learned_bps': memory.learned if memory else None,
                'total_bps': round(r.total, 3),
                'throttled': r.throttled,
                'active_high': r.active_high,
                'decision': r.decision,
                'reason': r.reason,
            }
        return {'enabled': bool(self.opts.controller_enabled),
                'unit': self.unit, 'period': self.period,
                'domains': domains}


def _fmt(value, fmt):
    return 'unknown' if value is None else fmt % value


def _level(value, unit):
    if value is None:
        return 'static'
    return '%d%s' % (value, '%' if unit == info.UNIT_PERCENT else
                     ' ' + unit)
