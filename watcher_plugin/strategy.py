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
what rdt-virt measures: each instance's memory bandwidth (bytes/s)
averaged over the audit's ``period``, its priority class (flavor extra
spec ``hw:rdt_priority``, else server metadata ``watcher-priority``), the
bandwidth controller's level of each low-priority instance over the same
window, and, where the datasource has it, each host's memory bandwidth
pressure. A host whose low instances sit at ``floor`` all through the
window cannot throttle further; a low instance without a level (not
controlled by the agent) leaves the decision to the bandwidth alone. The
decision is :func:`watcher_plugin.relief.choose`; each move is a live
migration without a destination, so Nova's scheduler (RDTFilter
included) picks it.

Datasources (:mod:`watcher_plugin.datasources`): Gnocchi, Prometheus or
Aetos, in Watcher's order of datasources. From Gnocchi (:mod:`.meters`)
the strategy reads Ceilometer's meters ``memory.bandwidth.total`` and
``level_metric`` (``memory.bandwidth.limit``, the MBA value in force on
each low-priority instance); Gnocchi holds no pressure. From Prometheus
or Aetos (:mod:`.promql`) it reads the agent's own series, pressure
included. Watcher's helpers answer ``statistic_aggregation`` for the
metrics of their own maps only, and the Gnocchi one returns the last
point of a window rather than its mean, so the strategy asks through each
helper's client. An audit in which no high or low instance has a single
bandwidth measure fails, saying what the datasource needs: deciding on
nothing would look like "no host needs relief". A host with a fact
missing (a bandwidth, a level that could not be read, its pressure where
pressure is read) is left alone, and the decision engine's log says
which.

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
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from watcher_plugin import compat
from watcher_plugin import datasources
from watcher_plugin import meters
from watcher_plugin import promql
from watcher_plugin import relief

LOG = log.getLogger(__name__)
BANDWIDTH = meters.BANDWIDTH
LIMIT = meters.LIMIT
NoDatasource = datasources.NoDatasource
# The agent's high watermark ([rdt_agent] controller_high_watermark).
PRESSURE_THRESHOLD = 0.85


class NoMeasure(exception.WatcherException):
    msg_fmt = ('rdt_noisy_neighbor: no %(metric)s measure of any of '
               '%(count)d high or low instances (%(names)s) from '
               '%(start)s to %(stop)s UTC in %(datasource)s. The audit '
               'needs %(needs)s. Last error: %(error)s')


class RDTNoisyNeighbor(base.NoisyNeighborBaseStrategy):
    """Move the low-priority instance that relieves a host most."""

    MIGRATION = 'migrate'
    # What "strategy state" lists as the strategy's metrics, through the
    # metric map of meters.Meters; an audit's datasource replaces it with
    # its own (datasource_backend).
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
                                   "policy's granularities (Gnocchi)",
                    'type': 'number', 'default': 300.0, 'minimum': 1},
                'bandwidth_threshold': {
                    'description': 'bytes/s the low-priority instances of '
                                   'a host use together before a high one '
                                   'beside them counts as under pressure',
                    'type': 'number', 'default': 1.0e9, 'minimum': 0},
                'level_metric': {
                    'description': "meter of the controller's levels "
                                   "(Gnocchi; Prometheus and Aetos read "
                                   "the agent's series); empty: levels "
                                   "are not used",
                    'type': 'string', 'default': LIMIT},
                'floor': {
                    'description': "the controller's floor level (the "
                                   "agent's [rdt_agent] controller_floor "
                                   "on percent hosts)",
                    'type': 'number', 'default': 10.0},
                'pressure_threshold': {
                    'description': "memory bandwidth pressure (the most "
                                   "pressed domain's) at or above which a "
                                   "host can need relief, where the "
                                   "datasource has it (Prometheus, "
                                   "Aetos); 0: pressure is not read",
                    'type': 'number', 'default': PRESSURE_THRESHOLD,
                    'minimum': 0},
                'instance_label': {
                    'description': "label of the agent's series that "
                                   "holds the instance's uuid (Prometheus, "
                                   "Aetos)",
                    'type': 'string', 'default': promql.INSTANCE_LABEL,
                    'pattern': '^[a-zA-Z_][a-zA-Z0-9_]*$'},
                'datasources': {
                    'description': "datasources to try in order for this "
                                   "audit; empty: the strategy's "
                                   "datasources option, else "
                                   "[watcher_datasources] datasources",
                    'type': 'array', 'default': [],
                    'items': {'type': 'string',
                              'enum': list(datasources.READ)}},
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
        """The reader of the audit's datasource.

        Watcher's own choice (``get_backend``) goes by metric names none
        of which knows rdt-virt's meters: :mod:`.datasources` walks the
        same order.
        """
        if not self._datasource_backend:
            params = self.input_parameters
            self._datasource_backend = datasources.choose(
                datasources.order(params, self.config), self.osc,
                params.get('instance_label', promql.INSTANCE_LABEL))
            # "strategy state" lists what this datasource is asked.
            self.DATASOURCE_METRICS = list(
                self._datasource_backend.METRICS)
        return self._datasource_backend

    def _window(self):
        return meters.Window(timeutils.utcnow(), self.get_period(None),
                             self.get_granularity(None),
                             bool(self.input_parameters.get('refresh')))

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

    def _read(self, reading, what, inst):
        """The value of a reading, logging what is missing."""
        if reading.value is None:
            LOG.warning('No %s of %s (%s) in %s: %s', what, inst.name,
                        inst.uuid, self.datasource_backend.NAME,
                        reading.missing)
        return reading.value

    def _instances(self, win):
        reader = self.datasource_backend
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
            bandwidth = level = unread = None
            if priority != relief.NORMAL:
                reading = reader.bandwidth(inst, win)
                bandwidth = self._read(reading, 'memory bandwidth', inst)
                if bandwidth is None:
                    self._last_error = reading.missing
            if level_metric and priority == relief.LOW:
                reading = reader.level(inst, win, level_metric)
                level = reading.value
                if reading.failed:
                    unread = 'the level'
                    self._read(reading, 'level', inst)
            LOG.info('%s on %s: %s, %s B/s, level %s', inst.name,
                     node.hostname, priority, bandwidth,
                     'not held all through the period'
                     if level == float('inf') else level)
            seen.append((relief.Instance(
                inst.uuid, inst.name, node.hostname, priority, bandwidth,
                level, unread), inst, node))
        return seen

    def _pressures(self, seen, win):
        """{host: pressure or None} where it is read, else None."""
        reader = self.datasource_backend
        threshold = self.input_parameters.get('pressure_threshold',
                                              PRESSURE_THRESHOLD)
        if not reader.HAS_PRESSURE or not threshold:
            LOG.info('Memory bandwidth pressure is not read (%s): the '
                     'decision rests on bandwidth and levels',
                     'threshold 0' if reader.HAS_PRESSURE else
                     '%s holds none' % reader.NAME)
            return None
        nodes = {node.hostname: node for _, _, node in seen}
        pressures = {}
        for host in relief.needs_relief([one for one, _, _ in seen]):
            reading = reader.pressure(nodes[host], win)
            pressures[host] = reading.value
            if reading.value is None:
                LOG.warning('No memory bandwidth pressure of %s in %s: %s',
                            host, reader.NAME, reading.missing)
        return pressures

    def _check_measured(self, seen, win):
        """Raise NoMeasure when no classed instance has a measure."""
        classed = [one for one, _, _ in seen
                   if one.priority != relief.NORMAL]
        if not classed or any(one.bandwidth is not None
                              for one in classed):
            return
        reader = self.datasource_backend
        start, stop = reader.span(win)
        raise NoMeasure(
            metric=reader.METRIC_MAP.get(BANDWIDTH, BANDWIDTH),
            count=len(classed),
            names=', '.join(sorted(one.name for one in classed)),
            start=start.isoformat(), stop=stop.isoformat(),
            datasource=reader.NAME, needs=reader.needs(BANDWIDTH, win),
            error=getattr(self, '_last_error', None))

    def do_execute(self, audit=None):
        params = self.input_parameters
        win = self._window()
        seen = self._instances(win)
        self._check_measured(seen, win)
        pressures = self._pressures(seen, win)
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
            params.get('bandwidth_threshold', 1.0e9), floor, pressures,
            params.get('pressure_threshold', PRESSURE_THRESHOLD))
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
