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

"""Build the host state document (:mod:`rdt_virt.agent.state`). Pure.

On top of the fields the state module documents, the agent adds (readers
must ignore what they do not know):

* ``host.closids_total`` / ``host.closids_used`` / ``host.mon_budget``;
* ``host.rotating``: monitored instances outnumber the RMID budget and
  monitoring groups are being multiplexed;
* ``host.mon_coverage``: share of the instances needing a monitoring
  group that have one now (``coverage`` is the share of monitored
  instances with values in this sample);
* per instance, ``domain`` (libvirt name) and ``counters`` (the group whose
  RMID counts it);
* per instance, ``project_id``: the owning project from Nova's metadata
  (null when the domain does not say), which the Prometheus endpoint
  turns into the label Aetos filters tenants' queries on;
* per instance, ``level`` is the controller's level in force in the
  instance's ``group``; ``level_next`` (only while it differs) the level
  the controller decided at this sample, which the next tick applies;
* ``host.mba``: whether the mounted resctrl offers memory bandwidth
  allocation (absent while resctrl is not mounted);
* ``host.controller.high_watermark``, and per domain of
  ``host.controller.domains`` the counts ``active_low``,
  ``low_at_floor`` (active low instances the controller cannot throttle
  further) and ``starved_high``;
* ``host.bandwidth_ceiling_bps``: the most the host's memory can move; no
  rate is published above it, and ``host.counter_resets`` counts the
  readings dropped because a counter jumped above it (a hardware reset).
* on hosts with package telemetry (Intel AET), per instance
  ``power_watts`` (core power over the last interval),
  ``energy_joules`` (a counter: core energy since the agent started) and
  ``activity_fps`` (farads per second, see :mod:`rdt_virt.agent.energy`),
  and ``host.power_watts``, their sum. Absent on other hosts.
"""

from rdt_virt.agent import sampler


def _round(value):
    return None if value is None else round(value, 3)


def build(time, interval, instances, placements, rates, rotation=None,
          rmids_total=0, rmids_used=0, closids_total=0, closids_used=0,
          mon_budget=0, extra=None, energy=None, levels=None,
          limits=None, pending=None):
    """The state document for one sample.

    :param time: wall-clock time of the sample (epoch seconds).
    :param interval: seconds the rates cover.
    :param instances: ``{uuid: Instance}``.
    :param placements: ``{uuid: Placement}``.
    :param rates: ``{uuid: Rates}``.
    :param rotation: the :class:`~rdt_virt.agent.rotation.Rotation`.
    :param extra: more ``host`` fields.
    :param energy: ``{uuid: Energy}`` on hosts with package telemetry,
        else None.
    :param levels: ``{uuid: level}`` the bandwidth controller holds in
        force in the group of each placement.
    :param pending: ``{uuid: level}`` the controller decided; where it
        differs from the level in force (the next tick applies it), the
        instance's ``level_next``.
    :param limits: ``{uuid: value}`` the MBA value in force for each
        low-priority instance: its level, else its static cap, else the
        host's maximum.
    """
    docs = {}
    monitored = 0
    with_values = 0
    for uuid, inst in sorted(instances.items()):
        place = placements.get(uuid)
        rate = rates.get(uuid) or sampler.Rates(
            reason=place.reason if place else 'not placed yet')
        if inst.monitor:
            monitored += 1
            if rate.has_values:
                with_values += 1
        counters = None
        if place is not None and place.counters is not None:
            counters = '/'.join(p for p in place.counters if p) or '/'
        docs[uuid] = {
            'name': inst.name,
            'domain': inst.name,
            'group': place.group if place else None,
            'mon_group': place.mon_group if place else None,
            'counters': counters,
            'policy': dict(inst.policy),
            'priority': inst.priority,
            'project_id': inst.project_id,
            'level': (levels or {}).get(uuid),
            'mb_limit': (limits or {}).get(uuid),
            'mbm_total_bps': _round(rate.mbm_total_bps),
            'mbm_local_bps': _round(rate.mbm_local_bps),
            'llc_occupancy_bytes': rate.llc_occupancy_bytes,
            'reason': rate.reason,
        }
        if pending is not None and (
                pending.get(uuid) != docs[uuid]['level']):
            docs[uuid]['level_next'] = pending.get(uuid)
        if energy is not None:
            figures = energy.get(uuid)
            docs[uuid].update(
                power_watts=_round(figures and figures.power_watts),
                energy_joules=figures and figures.energy_joules,
                activity_fps=_round(figures and figures.activity_fps))
    totals = sampler.host_totals(rates.get(u) for u in instances
                                 if rates.get(u) is not None)
    host = {
        'mbm_total_bps': _round(totals['mbm_total_bps']),
        'mbm_local_bps': _round(totals['mbm_local_bps']),
        'llc_occupancy_bytes': totals['llc_occupancy_bytes'],
        'rmids_total': rmids_total,
        'rmids_used': rmids_used,
        'closids_total': closids_total,
        'closids_used': closids_used,
        'mon_budget': mon_budget,
        'monitored': monitored,
        'instances': len(instances),
        'coverage': round(with_values / monitored, 4) if monitored else 1.0,
        'rotating': bool(rotation and rotation.rotating),
        'mon_coverage': round(rotation.coverage, 4) if rotation else 1.0,
    }
    if energy is not None:
        host['power_watts'] = _round(sum(
            e.power_watts for u, e in energy.items()
            if u in instances and e.power_watts is not None))
    host.update(extra or {})
    return {'time': time, 'interval': interval, 'host': host,
            'instances': docs}
