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

    def get_samples(self, manager, cache, resources):
        doc = self._state(cache)
        if doc is None:
            return
        instances = doc.get('instances') or {}
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
                type=sample.TYPE_GAUGE, unit=self.sample_unit,
                volume=value, resource_id=instance.id,
                additional_metadata={
                    'rdt_group': entry.get('group'),
                    'rdt_policy': entry.get('policy') or {}})


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
