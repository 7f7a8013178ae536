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

"""Ceilometer compute pollsters for RDT monitoring.

They bring back the meters Ceilometer dropped when Linux removed the perf
interface they used, with the same names, types and units, so Gnocchi
archive policies and Watcher's noisy-neighbour strategy find them again:

=========================  =====  =====  ================================
meter                      type   unit   value
=========================  =====  =====  ================================
``memory.bandwidth.total`` gauge  B/s    MBM bytes to all memory per second
``memory.bandwidth.local`` gauge  B/s    MBM bytes to local memory per second
``cpu_l3_cache``           gauge  B      CMT last-level cache occupancy
=========================  =====  =====  ================================

On hosts with Intel's package telemetry (Application Energy Telemetry,
Linux 7.0, ``info/PERF_PKG_MON``) three more, which no meter of
Ceilometer covered before:

======================  ==========  =====  ==================================
meter                   type        unit   value
======================  ==========  =====  ==================================
``cpu.core.power``      gauge       W      power of the instance's CPU cores
                                           over the agent's last interval
``cpu.core.energy``     cumulative  J      energy of the instance's CPU cores
                                           since rdt-virt-agent started
``cpu.core.activity``   gauge       F/s    switched capacitance per second:
                                           work done, independent of the
                                           frequency the cores ran at
======================  ==========  =====  ==================================

The names follow Ceilometer's instance meters, which name the part of the
instance first and keep the unit out of the name (``cpu``,
``memory.usage``, ``memory.bandwidth.total``, ``disk.device.read.bytes``),
and Kepler's VM metrics (``kepler_vm_cpu_joules_total`` and
``kepler_vm_cpu_watts`` with a ``zone`` label), whose "cpu" with zone
"core" is the scope of the kernel's ``core_energy``: the cores only, not
the L3 cache, memory or I/O. ``power.*`` was not used because Ceilometer's
``power.state`` is an instance's power state, not watts; energy is
``cumulative`` like Ceilometer's ``cpu`` (a reader or Gnocchi's rate
aggregation turns it into power over any period), while ``cpu.core.power``
is the agent's own rate for those who read one value.

Where rdt-virt-agent's bandwidth controller runs, one more, for each
low-priority instance (``hw:rdt_priority=low``), so that Gnocchi keeps
when and how far the controller throttled it:

==========================  =====  ====  ===================================
meter                       type   unit  value
==========================  =====  ====  ===================================
``memory.bandwidth.limit``  gauge  %     the MBA value in force: the
                                         controller's level while it holds
                                         the instance, else its static cap
                                         (``hw:mem_bw``), else the host's
                                         maximum (100 %)
==========================  =====  ====  ===================================

Its unit is the host's MBA unit: percent of the unthrottled bandwidth
(Intel, Arm), ``MB/s`` on hosts mounted with ``mba_MBps``, or AMD's
``1/8 GB/s``. Gnocchi keeps the unit of a metric's first sample, so a cloud
whose hosts mix these units gets a metric per instance in the unit of the
host it started on; mixing is rare (one resctrl mount option for all
hosts of a kind) and the agent's Prometheus series carry the unit per
sample.

Each sample's metadata carries the instance's rdt-virt group
(``rdt_group``), its policy (``rdt_policy``), its protection class
(``rdt_priority``: ``high``, ``normal`` or ``low``) and the level the
bandwidth controller holds it at (``rdt_level``, null while it is not
held, in ``rdt_level_unit``: ``percent``, ``MBps`` or ``amd``).

They are registered in the ``ceilometer.poll.compute`` namespace and use
the ``local_instances`` discovery, so ceilometer-polling on a compute host
gives them the host's instances. The values come from the state file that
rdt-virt-agent replaces atomically (``[rdt] state_file``, which the
pollsters register on Ceilometer's configuration); the file is read once
per polling cycle. Instances without a value (not monitored, rotated out,
first reading) produce no sample rather than a 0. A state file older than
three agent sample intervals (and at least a minute) is ignored: the agent
is not running and its numbers are stale.
"""

from ceilometer.compute.pollsters import util
from ceilometer.polling import plugin_base
from ceilometer import sample
from oslo_log import log as logging

from rdt_virt.agent import state
from rdt_virt.conf import rdt as rdt_conf

LOG = logging.getLogger(__name__)

CACHE_KEY = 'rdt_virt.state'
MIN_MAX_AGE = state.MIN_MAX_AGE


def read_state(path, now=None):
    """The agent's document, or None when absent or stale."""
    doc = state.read(path)
    if doc is None:
        return None
    if state.is_stale(doc, now):
        LOG.warning('Ignoring the stale rdt-virt state file %s (is '
                    'rdt-virt-agent running?)', path)
        return None
    return doc


class _StatePollster(plugin_base.PollsterBase):
    """Emits one gauge per instance from a field of the state file."""

    sample_name = None
    sample_unit = None
    sample_type = sample.TYPE_GAUGE
    field = None

    def __init__(self, conf):
        super().__init__(conf)
        # Ceilometer has its own ConfigOpts: make [rdt] state_file known.
        rdt_conf.register_opts(conf)

    @property
    def default_discovery(self):
        return 'local_instances'

    def _state(self, cache):
        if CACHE_KEY not in cache:
            cache[CACHE_KEY] = read_state(self.conf.rdt.state_file)
        return cache[CACHE_KEY]

    def unit_of(self, level_unit):
        """The samples' unit, given the host's MBA unit."""
        return self.sample_unit

    def get_samples(self, manager, cache, resources):
        doc = self._state(cache)
        if doc is None:
            return
        instances = doc.get('instances') or {}
        part = (doc.get('host') or {}).get('controller')
        unit = part.get('unit') if isinstance(part, dict) else None
        sample_unit = self.unit_of(unit)
        if sample_unit is None:
            return
        for instance in resources:
            entry = instances.get(instance.id)
            if not entry:
                continue
            value = entry.get(self.field)
            if value is None:
                LOG.debug('%s has no %s: %s', instance.id, self.sample_name,
                          entry.get('reason'))
                continue
            yield util.make_sample_from_instance(
                self.conf, instance, name=self.sample_name,
                type=self.sample_type, unit=sample_unit,
                volume=value, resource_id=instance.id,
                additional_metadata={
                    'rdt_group': entry.get('group'),
                    'rdt_policy': entry.get('policy') or {},
                    'rdt_priority': entry.get('priority') or 'normal',
                    'rdt_level': entry.get('level'),
                    'rdt_level_unit': unit})


class MemoryBandwidthTotalPollster(_StatePollster):
    sample_name = 'memory.bandwidth.total'
    sample_unit = 'B/s'
    field = 'mbm_total_bps'


class MemoryBandwidthLocalPollster(_StatePollster):
    sample_name = 'memory.bandwidth.local'
    sample_unit = 'B/s'
    field = 'mbm_local_bps'


class CPUL3CachePollster(_StatePollster):
    sample_name = 'cpu_l3_cache'
    sample_unit = 'B'
    field = 'llc_occupancy_bytes'


class CPUCorePowerPollster(_StatePollster):
    sample_name = 'cpu.core.power'
    sample_unit = 'W'
    field = 'power_watts'


class CPUCoreEnergyPollster(_StatePollster):
    sample_name = 'cpu.core.energy'
    sample_unit = 'J'
    sample_type = sample.TYPE_CUMULATIVE
    field = 'energy_joules'


class CPUCoreActivityPollster(_StatePollster):
    sample_name = 'cpu.core.activity'
    sample_unit = 'F/s'
    field = 'activity_fps'


class MemoryBandwidthLimitPollster(_StatePollster):
    sample_name = 'memory.bandwidth.limit'
    field = 'mb_limit'
    UNITS = {'percent': '%', 'MBps': 'MB/s', 'amd': '1/8 GB/s'}

    def unit_of(self, level_unit):
        # A document without the controller's unit has no limits either.
        return self.UNITS.get(level_unit)
