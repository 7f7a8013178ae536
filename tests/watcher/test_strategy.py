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

"""rdt_noisy_neighbor inside Watcher: its model, solution and actions.

Needs python-watcher (``tox -e cloud`` and the ``release-*`` targets); skipped
elsewhere. Watcher's own compute model and solution; Gnocchi's answers
are given per instance, as its client returns them ([time, granularity,
value] points).
"""

import datetime

import fixtures
import testtools

from tests import base

try:
    from gnocchiclient import exceptions as gnocchi_exc
    from watcher.common import utils as watcher_utils
    from watcher.decision_engine.model import element
    from watcher.decision_engine.model import model_root
    from watcher.decision_engine.solution import default as solution_mod
    from watcher.decision_engine.strategy.strategies import base as \
        strategy_base

    from watcher_plugin import meters
    from watcher_plugin import strategy
except ImportError:
    strategy = None

GB = 10 ** 9


class Measures(object):
    """Gnocchi's metric API as the strategy calls it, with fixed points."""

    def __init__(self, points, errors=None):
        self.points = points
        self.errors = errors or {}
        self.calls = []

    def get_measures(self, metric, resource_id, **kwargs):
        self.calls.append((metric, resource_id, kwargs))
        if (metric, resource_id) in self.errors:
            raise self.errors[metric, resource_id]
        if (metric, resource_id) not in self.points:
            raise gnocchi_exc.MetricNotFound(
                404, 'Metric %s not found' % metric)
        return self.points[metric, resource_id]


class Datasource(object):
    NAME = 'gnocchi'

    def __init__(self, points, errors=None):
        self.gnocchi = type('Client', (), {})()
        self.gnocchi.metric = Measures(points, errors)


class Server(object):
    def __init__(self, uuid, extra_specs):
        self.uuid = uuid
        self.flavor = {'original_name': 'f', 'extra_specs': extra_specs}


class NovaclientServer(object):
    """A server as Watcher 14 and 15 list it: novaclient's, uuid as id."""

    def __init__(self, uuid, extra_specs):
        self.id = uuid
        self.flavor = {'original_name': 'f', 'extra_specs': extra_specs}

    def __getattr__(self, name):
        # novaclient's Resource: an attribute the API did not return.
        raise AttributeError(name)


class Nova(object):
    """NovaHelper's server listing, with each server's embedded flavor."""

    def __init__(self, specs, server=Server):
        self.specs = specs
        self.server = server
        self.calls = 0

    def get_instance_list(self):
        self.calls += 1
        return [self.server(uuid, specs)
                for uuid, specs in self.specs.items()]


def build_model(room=True):
    """Two hosts: compute1 holds protected, low-1, low-2 and normal.

    compute2 has room for one of them, or none (``room=False``).
    """
    model = model_root.ModelRoot()
    for name, vcpus in (('compute1', 8), ('compute2', 8 if room else 1)):
        model.add_node(element.ComputeNode(
            uuid='node-' + name, hostname=name, memory=4096,
            memory_mb_reserved=0, disk=100, disk_gb_reserved=0,
            vcpus=vcpus, vcpu_reserved=0, memory_ratio=1.0,
            vcpu_ratio=1.0, disk_ratio=1.0))
    node1 = model.get_node_by_uuid('node-compute1')
    node2 = model.get_node_by_uuid('node-compute2')
    blocker = element.Instance(uuid='blocker', name='blocker', vcpus=1,
                               memory=64, disk=1, metadata={},
                               flavor_extra_specs={})
    model.add_instance(blocker)
    model.map_instance(blocker, node2)
    for name, meta, specs in (
            ('protected', {'watcher-priority': 'high'}, {}),
            ('low-1', {'watcher-priority': 'low'}, {}),
            ('low-2', {}, {'hw:rdt_priority': 'low'}),
            ('normal', {}, {})):
        inst = element.Instance(uuid=name, name=name, vcpus=2,
                                memory=64, disk=1, metadata=meta,
                                flavor_extra_specs=specs)
        model.add_instance(inst)
        model.map_instance(inst, node1)
    return model


@testtools.skipIf(strategy is None, 'python-watcher is not installed')
class TestStrategy(base.TestCase):

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(
            fixtures.FakeLogger(level=10, format='%(message)s'))

    def model(self, room=True):
        return build_model(room)

    def run_strategy(self, model, points, nova=None, errors=None, **params):
        self.datasource = Datasource(points, errors)
        s = strategy.RDTNoisyNeighbor(config=watcher_utils.Struct(
            datasources=None))
        s._compute_model = model
        s._datasource_backend = meters.Meters(self.datasource)
        s._nova = lambda: nova
        s.solution = solution_mod.DefaultSolution(goal=s.goal, strategy=s)
        s.input_parameters = watcher_utils.Struct(dict(dict(
            period=600.0, granularity=300.0, bandwidth_threshold=GB,
            level_metric='', floor=10.0, refresh=False), **params))
        s.do_execute()
        return s.solution.actions

    def points(self, **bandwidth):
        return {('memory.bandwidth.total', name): [
            ['2026-01-01T00:00:00', 300.0, value],
            ['2026-01-01T00:05:00', 300.0, value]]
            for name, value in bandwidth.items()}

    def test_live_migration_of_the_noisiest_low_without_destination(self):
        actions = self.run_strategy(self.model(), self.points(
            protected=GB, **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB}))
        self.assertEqual([{'action_type': 'migrate', 'input_parameters': {
            'resource_id': 'low-2', 'migration_type': 'live',
            'source_node': 'compute1', 'resource_name': 'low-2'}}], actions)
        # The mean over the audit's window, at its granularity; the normal
        # instance is not read at all.
        calls = self.datasource.gnocchi.metric.calls
        self.assertEqual({'protected', 'low-1', 'low-2'},
                         {c[1] for c in calls})
        self.assertEqual(300.0, calls[0][2]['granularity'])
        # From the start of the 300 s interval that holds "600 s ago":
        # Gnocchi stamps a point with the start of its interval.
        start, stop = calls[0][2]['start'], calls[0][2]['stop']
        self.assertEqual(0, start.timestamp() % 300)
        self.assertTrue(600 <= (stop - start).total_seconds() < 900)

    def test_levels_above_the_floor_leave_it_to_the_host(self):
        points = self.points(protected=GB,
                             **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB})
        limits = {('memory.bandwidth.limit', name): [
            ['2026-01-01T00:00:00', 300.0, value]]
            for name, value in (('low-1', 10.0), ('low-2', 40.0))}
        params = dict(level_metric='memory.bandwidth.limit')
        self.assertEqual([], self.run_strategy(
            self.model(), {**points, **limits}, **params))
        # Both held at the floor all through the window: only a move helps.
        limits['memory.bandwidth.limit', 'low-2'][0][2] = 10.0
        actions = self.run_strategy(self.model(), {**points, **limits},
                                    **params)
        self.assertEqual(['low-2'], [a['input_parameters']['resource_id']
                                     for a in actions])
        self.assertIn(('memory.bandwidth.limit', 'low-2'),
                      {c[:2] for c in self.datasource.gnocchi.metric.calls})

    def test_a_level_meter_gnocchi_does_not_have(self):
        # Low instances the agent does not control: bandwidth alone.
        actions = self.run_strategy(self.model(), self.points(
            protected=GB, **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB}),
            level_metric='memory.bandwidth.limit')
        self.assertEqual(['low-2'], [a['input_parameters']['resource_id']
                                     for a in actions])

    def test_a_level_gnocchi_cannot_give_leaves_the_host_alone(self):
        points = self.points(protected=GB,
                             **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB})
        points['memory.bandwidth.limit', 'low-1'] = [
            ['2026-01-01T00:00:00', 300.0, 10.0]]
        errors = {('memory.bandwidth.limit', 'low-2'):
                  gnocchi_exc.ClientException(503, 'Service Unavailable')}
        self.assertEqual([], self.run_strategy(
            self.model(), points, errors=errors,
            level_metric='memory.bandwidth.limit'))
        self.assertIn('No level of low-2 (low-2) in gnocchi: '
                      'memory.bandwidth.limit of low-2: Service Unavailable',
                      self.logger.output)
        self.assertIn('compute1: cannot read the level of low-2',
                      self.logger.output)

    def test_nothing_without_measures(self):
        self.assertEqual([], self.run_strategy(self.model(), self.points(
            protected=GB, **{'low-1': 9 * GB})))

    def test_nothing_when_no_host_has_room(self):
        self.assertEqual([], self.run_strategy(
            self.model(room=False), self.points(
                protected=GB, **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB})))

    def flavor_only_model(self):
        """Classes only in the flavors, which Watcher's model lacks.

        As Watcher builds its model without [compute_model]
        enable_extended_attributes: every flavor_extra_specs is empty.
        """
        model = self.model()
        for inst in model.get_all_instances().values():
            inst.flavor_extra_specs = {}
            inst.metadata = {}
        return model

    FLAVORS = {'protected': {'hw:rdt_priority': 'high'},
               'low-1': {'hw:rdt_priority': 'low', 'hw:mem_bw': '20'},
               'low-2': {'hw:rdt_priority': 'low'},
               'normal': {}, 'blocker': {}}

    def test_class_from_the_flavor_alone(self):
        nova = Nova(self.FLAVORS)
        actions = self.run_strategy(
            self.flavor_only_model(), self.points(
                protected=GB, **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB}),
            nova=nova)
        self.assertEqual(['low-2'], [a['input_parameters']['resource_id']
                                     for a in actions])
        self.assertEqual(1, nova.calls)
        self.assertEqual({'protected', 'low-1', 'low-2'},
                         {c[1] for c in self.datasource.gnocchi.metric.calls})

    def test_class_from_the_flavor_with_novaclient_servers(self):
        # Watcher 14 and 15 list novaclient's servers (watcher_plugin.compat).
        actions = self.run_strategy(
            self.flavor_only_model(), self.points(
                protected=GB, **{'low-1': 0.7 * GB, 'low-2': 1.5 * GB}),
            nova=Nova(self.FLAVORS, server=NovaclientServer))
        self.assertEqual(['low-2'], [a['input_parameters']['resource_id']
                                     for a in actions])

    def test_no_measure_at_all_fails_the_audit(self):
        e = self.assertRaises(
            strategy.NoMeasure, self.run_strategy,
            self.flavor_only_model(), {}, nova=Nova(self.FLAVORS))
        message = str(e)
        self.assertIn('no memory.bandwidth.total measure of any of 3 high '
                      'or low instances (low-1, low-2, protected)', message)
        self.assertIn('granularity of 300 s in its Gnocchi archive policy',
                      message)
        self.assertIn('Metric memory.bandwidth.total not found', message)

    def test_window_never_shorter_than_a_point(self):
        now = datetime.datetime(2026, 1, 1, 0, 7, 30)
        # 60 s reads as 300 s: one whole point at least.
        self.assertEqual((datetime.datetime(2026, 1, 1, 0, 0), now),
                         meters.window(now, 60, 300))
        # From the start of the point that holds the window's first second.
        self.assertEqual((datetime.datetime(2025, 12, 31, 23, 50), now),
                         meters.window(now, 900, 300))

    def test_strategy_state_lists_its_own_meters(self):
        helper = type('Helper', (), {
            'gnocchi': None,
            'list_metrics': lambda self: {'memory.bandwidth.total', 'cpu'},
            'check_availability': lambda self: 'available'})()
        state = strategy_base.StrategyEndpoint(None)._collect_metrics(
            strategy.RDTNoisyNeighbor, meters.Meters(helper))
        self.assertEqual([{'memory.bandwidth.total': 'available'},
                          {'memory.bandwidth.limit': 'not available'}],
                         state['state'])
