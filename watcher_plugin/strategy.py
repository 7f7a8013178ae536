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
reads the measures of the window (:func:`watcher_plugin.meters.window`)
through the helper's Gnocchi client. An audit in which no high or low
instance has a single bandwidth point fails, saying what the window needs:
deciding on nothing would look like "no host needs relief".

The class comes from the flavor. Watcher's compute model carries flavor
extra specs only with ``[compute_model] enable_extended_attributes``
(off by default); without them the strategy reads the servers' embedded
flavors from Nova once per audit (microversion 2.47 or later, Watcher's
default ``[nova] api_version`` is 2.56).
"""


from oslo_log import log
from oslo_utils import timeutils
from watcher.common import exception
from watcher.common import nova_helper
from watcher.decision_engine.datasources import gnocchi as gnocchi_ds
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from watcher_plugin import compat
from watcher_plugin import meters
from watcher_plugin import relief

LOG = log.getLogger(__name__)
BANDWIDTH = meters.BANDWIDTH
LIMIT = meters.LIMIT


class NoMeasure(exception.WatcherException):
    msg_fmt = ('rdt_noisy_neighbor: no %(metric)s measure of any of '
               '%(count)d high or low instances (%(names)s) from '
               '%(start)s to %(stop)s UTC. The audit needs %(needs)s. '
               'Last error: %(error)s')


class RDTNoisyNeighbor(base.NoisyNeighborBaseStrategy):
    """Move the low-priority instance that relieves a host most."""

    MIGRATION = 'migrate'
    # What "strategy state" lists as the strategy's metrics, through the
    # metric map of meters.Meters.
    DATASOURCE_METRICS = list(meters.METERS)

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

    @property
    def datasource_backend(self):
        # Gnocchi only (the strategy reads its client); Watcher's own
        # choice of datasource goes by metric names none of which knows
        # rdt-virt's meters.
        if not self._datasource_backend:
            self._datasource_backend = meters.Meters(
                gnocchi_ds.GnocchiHelper(osc=self.osc))
        return self._datasource_backend

    def _window(self, instance):
        return meters.window(timeutils.utcnow(), self.get_period(instance),
                             self.get_granularity(instance))

    def _mean(self, instance, metric):
        """Mean of ``metric`` of ``instance`` over the period, or None."""
        gnocchi = getattr(self.datasource_backend, 'gnocchi', None)
        if gnocchi is None:
            LOG.warning('The %s datasource is not supported: Gnocchi only',
                        self.datasource_backend.NAME)
            return None
        start, stop = self._window(instance)
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
            self._last_error = '%s of %s: %s' % (metric, instance.uuid, e)
            LOG.warning('No %s of %s: %s', metric, instance.uuid, e)
            return None
        values = [p[2] for p in points or ()]
        if not values:
            self._last_error = '%s of %s: no point in the window' % (
                metric, instance.uuid)
            LOG.warning('No %s of %s from %s to %s at %s s', metric,
                        instance.uuid, start, stop,
                        self.get_granularity(instance))
            return None
        return sum(values) / len(values)

    def _flavor_specs(self, instances):
        """{uuid: flavor extra specs} of ``instances``.

        From Watcher's model where it has them, else from Nova's servers
        (one listing for the whole audit).
        """
        specs = {inst.uuid: getattr(inst, 'flavor_extra_specs', None) or {}
                 for inst in instances}
        if not instances or any(specs.values()):
            # Extended attributes on: a flavor without extra specs has
            # none to read.
            return specs
        try:
            servers = self._nova().get_instance_list()
        except Exception as e:
            LOG.warning('Cannot read the flavors of the servers from Nova, '
                        'classes come from watcher-priority metadata '
                        'only: %s', e)
            return specs
        missing = 0
        for server in servers:
            uuid = compat.server_uuid(server)
            if uuid not in specs:
                continue
            flavor = server.flavor or {}
            if 'extra_specs' not in flavor:
                missing += 1
            specs[uuid] = flavor.get('extra_specs') or {}
        if missing:
            LOG.warning('Nova returned %d servers without their flavor\'s '
                        'extra specs: [nova] api_version must be 2.47 or '
                        'later for hw:rdt_priority to be read', missing)
        return specs

    def _nova(self):
        return nova_helper.NovaHelper(osc=self.osc)

    def _instances(self):
        level_metric = self.input_parameters.get('level_metric', LIMIT)
        active = []
        for node in self.compute_model.get_all_compute_nodes().values():
            for inst in self.compute_model.get_node_instances(node):
                if inst.state == element.InstanceState.ACTIVE.value:
                    active.append((inst, node))
        specs = self._flavor_specs([inst for inst, _ in active])
        seen = []
        for inst, node in active:
            priority = relief.priority_of(specs.get(inst.uuid),
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

    def _check_measured(self, seen):
        """Raise NoMeasure when no classed instance has a measure."""
        classed = [(one, inst) for one, inst, _ in seen
                   if one.priority != relief.NORMAL]
        if not classed or any(one.bandwidth is not None
                              for one, _ in classed):
            return
        start, stop = self._window(classed[0][1])
        granularity = self.get_granularity(classed[0][1])
        raise NoMeasure(
            metric=BANDWIDTH, count=len(classed),
            names=', '.join(sorted(one.name for one, _ in classed)),
            start=start.isoformat(), stop=stop.isoformat(),
            needs=meters.needs(BANDWIDTH, self.get_period(classed[0][1]),
                               granularity),
            error=getattr(self, '_last_error', None))

    def do_execute(self, audit=None):
        params = self.input_parameters
        seen = self._instances()
        self._check_measured(seen)
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
