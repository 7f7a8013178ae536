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

"""Watcher strategy ``rdt_noisy_neighbor``: move a noisy low neighbour.

Goal ``noisy_neighbor``, as the upstream strategy of that name, but on
what rdt-virt measures: each instance's ``memory.bandwidth.total``
(bytes/s, Ceilometer's rdt-virt pollster) averaged over the audit's
``period`` at its ``granularity``, its priority class (flavor extra spec
``hw:rdt_priority``, else server metadata ``watcher-priority``) and the
bandwidth controller's levels: ``level_metric``, by default
``memory.bandwidth.limit`` (the MBA value in force on each low-priority
instance, which the agent publishes), averaged over the same window. A
host whose low instances sit at ``floor`` all through the window cannot
throttle further; a low instance without that meter (not controlled by
the agent) leaves the decision to the bandwidth alone. The decision is
:func:`watcher_plugin.relief.choose`; each move is a live migration
without a destination, so Nova's scheduler (RDTFilter included) picks it.

Datasource: Gnocchi. The upstream Gnocchi helper's
``statistic_aggregation`` returns the last point of the window, not its
mean, and knows only the meters of its own metric map; this strategy
reads the measures of the window through the helper's Gnocchi client.
"""

import datetime

from oslo_log import log
from oslo_utils import timeutils
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from watcher_plugin import relief

LOG = log.getLogger(__name__)
BANDWIDTH = 'memory.bandwidth.total'
LIMIT = 'memory.bandwidth.limit'


class RDTNoisyNeighbor(base.NoisyNeighborBaseStrategy):
    """Move the low-priority instance that relieves a host most."""

    MIGRATION = 'migrate'
    # Selects the datasource: one that serves the noisy-neighbour goal's
    # metric (Gnocchi maps it to cpu_l3_cache).
    DATASOURCE_METRICS = ['instance_l3_cache_usage']

    @classmethod
    def get_name(cls):
        return 'rdt_noisy_neighbor'

    @classmethod
    def get_display_name(cls):
        return 'rdt-virt noisy neighbour'

    @classmethod
    def get_translatable_display_name(cls):
        return 'rdt-virt noisy neighbour'

    @classmethod
    def get_schema(cls):
        return {
            'properties': {
                'period': {
                    'description': 'seconds of measures averaged',
                    'type': 'number', 'default': 900.0, 'minimum': 1},
                'granularity': {
                    'description': "seconds per point: one of the archive "
                                   "policy's granularities",
                    'type': 'number', 'default': 300.0, 'minimum': 1},
                'bandwidth_threshold': {
                    'description': 'bytes/s the low-priority instances of '
                                   'a host use together before a high one '
                                   'beside them counts as under pressure',
                    'type': 'number', 'default': 1.0e9, 'minimum': 0},
                'level_metric': {
                    'description': "meter of the controller's levels; "
                                   "empty: levels are not used",
                    'type': 'string', 'default': LIMIT},
                'floor': {
                    'description': "the controller's floor level (the "
                                   "agent's [rdt_agent] controller_floor "
                                   "on percent hosts)",
                    'type': 'number', 'default': 10.0},
                'refresh': {
                    'description': 'have Gnocchi aggregate what it has not '
                                   'yet before reading',
                    'type': 'boolean', 'default': False},
            },
        }

    def get_period(self, resource):
        return self.input_parameters.get('period', 900.0)

    def get_granularity(self, resource):
        return self.input_parameters.get('granularity', 300.0)

    def pre_execute(self):
        self._pre_execute()

    def _mean(self, instance, metric):
        """Mean of ``metric`` of ``instance`` over the period, or None."""
        gnocchi = getattr(self.datasource_backend, 'gnocchi', None)
        if gnocchi is None:
            LOG.warning('The %s datasource is not supported: Gnocchi only',
                        self.datasource_backend.NAME)
            return None
        stop = timeutils.utcnow()
        start = stop - datetime.timedelta(seconds=self.get_period(instance))
        kwargs = dict(metric=metric, resource_id=instance.uuid, start=start,
                      stop=stop, granularity=self.get_granularity(instance),
                      aggregation='mean')
        if self.input_parameters.get('refresh'):
            kwargs['refresh'] = True
        try:
            points = gnocchi.metric.get_measures(**kwargs)
        except Exception as e:
            # No such metric or resource, or a granularity the archive
            # policy does not keep: no measure.
            LOG.warning('No %s of %s: %s', metric, instance.uuid, e)
            return None
        values = [p[2] for p in points or ()]
        return sum(values) / len(values) if values else None

    def _instances(self):
        level_metric = self.input_parameters.get('level_metric', LIMIT)
        seen = []
        for node in self.compute_model.get_all_compute_nodes().values():
            for inst in self.compute_model.get_node_instances(node):
                if inst.state != element.InstanceState.ACTIVE.value:
                    continue
                priority = relief.priority_of(
                    getattr(inst, 'flavor_extra_specs', None),
                    inst.metadata)
                bandwidth = level = None
                if priority != relief.NORMAL:
                    bandwidth = self._mean(inst, BANDWIDTH)
                    if level_metric and priority == relief.LOW:
                        level = self._mean(inst, level_metric)
                LOG.info('%s on %s: %s, %s B/s, level %s', inst.name,
                         node.hostname, priority, bandwidth, level)
                seen.append((relief.Instance(
                    inst.uuid, inst.name, node.hostname, priority, bandwidth,
                    level), inst, node))
        return seen

    def do_execute(self, audit=None):
        params = self.input_parameters
        seen = self._instances()
        by_uuid = {one.uuid: (inst, node) for one, inst, node in seen}
        nodes = list(self.compute_model.get_all_compute_nodes().values())

        def has_room(candidate):
            inst, source = by_uuid[candidate.uuid]
            for node in nodes:
                if node.uuid == source.uuid:
                    continue
                free = self.compute_model.get_node_free_resources(node)
                if (free['vcpu'] >= inst.vcpus and
                        free['memory'] >= inst.memory and
                        free['disk'] >= inst.disk):
                    return True
            return False
        floor = params.get('floor', 10.0) if params.get(
            'level_metric', LIMIT) else None
        moves, reasons = relief.choose(
            [one for one, _, _ in seen], has_room,
            params.get('bandwidth_threshold', 1.0e9), floor)
        for host, reason in sorted(reasons.items()):
            LOG.info('%s: %s', host, reason)
        for move in moves:
            inst, source = by_uuid[move.instance.uuid]
            # No destination: Nova's scheduler chooses it.
            self.solution.add_action(
                action_type=self.MIGRATION, resource_id=inst.uuid,
                input_parameters={'migration_type': 'live',
                                  'source_node': source.hostname,
                                  'resource_name': inst.name})

    def post_execute(self):
        self.solution.model = self.compute_model
