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

"""rdt_noisy_neighbor on Watcher's Prometheus and Aetos datasources.

A real Prometheus (:mod:`tests.watcher.promserver`) holds the agent's
series for the facts of each test; Watcher builds its own datasource
helper from its configuration, as the decision engine does, and the
strategy runs in Watcher's model (that of test_strategy). The same facts
are given to the Gnocchi path (Gnocchi's client answers, as in
test_strategy), so that the two can be compared: the numbers read and the
plan.

The tests fail, not skip, where prometheus or promtool is missing
(:data:`tests.watcher.promserver.INSTALL` says what to install).

Aetos is Prometheus behind Keystone: its helper asks Keystone's catalog
for the ``metric-storage`` endpoint and sends the session's token. Here
the Keystone session is a real keystoneauth session whose auth plugin is
a fixed token and endpoint (the real Prometheus), the one part that
stands in for Keystone. A real Keystone and Aetos are for the cloud test
(tox -e cloud) to exercise; it does not run Aetos yet.
"""

from unittest import mock

import fixtures
import testtools

from rdt_virt.cloud import flow_prometheus
from rdt_virt.cloud import flow_watcher
from tests import base
from tests.watcher import promserver

try:
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint
    from watcher.common import utils as watcher_utils
    import watcher.conf  # noqa: F401  (registers Watcher's options)
    from watcher.decision_engine.solution import default as solution_mod
    from watcher.decision_engine.strategy.strategies import base as \
        strategy_base

    from tests.watcher import test_strategy as gnocchi_path
    from watcher_plugin import meters
    from watcher_plugin import relief
    from watcher_plugin import strategy
except ImportError:
    strategy = None

try:
    from watcher.decision_engine.datasources import aetos
except ImportError:
    # Watcher 14 (2025.1) has no Aetos datasource.
    aetos = None

GB = 10 ** 9
AGENT = 'rdt-virt-agent'
BW = 'rdt_virt_instance_memory_bandwidth_total_bytes_per_second'
LEVEL = 'rdt_virt_instance_controller_level'
THROTTLED = 'rdt_virt_instance_controller_throttled'
PRESSURE = 'rdt_virt_domain_bandwidth_pressure_ratio'
HOSTS = {'compute1': {'fqdn': 'compute1.example.com'},
         'compute2': {'fqdn': 'compute2.example.com'}}
BANDWIDTH = {'protected': GB, 'low-1': 0.7 * GB, 'low-2': 1.5 * GB}
LEVELS = {'low-1': 10.0, 'low-2': 10.0}
PRESSURES = {'compute1': {'0': 0.97, '1': 0.4}, 'compute2': {'0': 0.2}}


def agent_series(bandwidth=BANDWIDTH, levels=LEVELS, pressures=PRESSURES,
                 label='instance_uuid', throttled=None, hosts=HOSTS):
    """The agent's series for the facts, as Prometheus stores them.

    Every instance of the facts runs on compute1. The target's labels
    (``job``, ``instance``, the host label) are on every series, as a
    scrape adds them; the agent's own per-instance labels are
    ``instance_uuid`` and ``group`` (``unit`` on levels).

    :param throttled: {uuid: value or function of age} where it is not
        1 all through.
    """
    def target(host):
        return dict(hosts.get(host, {'fqdn': host}), job=AGENT,
                    instance='127.0.0.1:%d' % (sorted(HOSTS).index(host) + 1))

    series = []
    for uuid, value in bandwidth.items():
        series.append((BW, dict(target('compute1'), group='rdtvirt-mb10',
                                **{label: uuid}), value))
    for uuid, value in levels.items():
        labels = dict(target('compute1'), group='rdtvirt-mb10',
                      **{label: uuid})
        series.append((LEVEL, dict(labels, unit='percent'), value))
        series.append((THROTTLED, labels,
                       (throttled or {}).get(uuid, 1.0)))
    for host, domains in pressures.items():
        for domain, value in domains.items():
            series.append((PRESSURE, dict(target(host), domain=domain),
                           value))
    return series


def gnocchi_points(bandwidth=BANDWIDTH, levels=LEVELS):
    """The same facts as Gnocchi's client returns them."""
    points = {}
    for meter, facts in (('memory.bandwidth.total', bandwidth),
                         ('memory.bandwidth.limit', levels)):
        for uuid, value in facts.items():
            points[meter, uuid] = [['2026-01-01T00:00:00', 300.0, value],
                                   ['2026-01-01T00:05:00', 300.0, value]]
    return points


class RecordingToken(token_endpoint.Token if strategy else object):
    """Keystone, for Aetos's helper: a fixed token and endpoint."""

    def __init__(self, endpoint, token):
        super().__init__(endpoint, token)
        self.lookups = []
        self.tokens = 0

    def get_endpoint(self, session, **kwargs):
        self.lookups.append(kwargs)
        return super().get_endpoint(session, **kwargs)

    def get_token(self, session):
        self.tokens += 1
        return super().get_token(session)


class OpenStackClients(object):
    """Watcher's clients as the Aetos helper uses them: their session."""

    def __init__(self, session):
        self.session = session


class PrometheusCase(base.TestCase):
    """The strategy in Watcher's model, on a real Prometheus."""

    PARAMS = dict(period=600.0, granularity=300.0, bandwidth_threshold=GB,
                  level_metric='memory.bandwidth.limit', floor=10.0,
                  pressure_threshold=0.85, refresh=False)

    def setUp(self):
        super().setUp()
        why = promserver.missing()
        if why:
            self.fail(why)
        self.logger = self.useFixture(
            fixtures.FakeLogger(level=10, format='%(message)s'))

    def serve(self, hosts=HOSTS, **facts):
        self.server = self.useFixture(promserver.Prometheus(
            agent_series(hosts=hosts, **facts), hosts))
        self.flags(group='prometheus_client', host='127.0.0.1',
                   port=str(self.server.port))
        return self.server

    def run_strategy(self, config_datasources=('prometheus',), backend=None,
                     osc=None, model=None, execute=True, **params):
        """The actions, and what the decision was given.

        :param config_datasources: the strategy's datasources option.
        :param backend: the datasource reader to use; None: the one the
            strategy chooses.
        """
        s = strategy.RDTNoisyNeighbor(config=watcher_utils.Struct(
            datasources=list(config_datasources)), osc=osc)
        s._compute_model = model or gnocchi_path.build_model()
        s._nova = lambda: None
        s.solution = solution_mod.DefaultSolution(goal=s.goal, strategy=s)
        s.input_parameters = watcher_utils.Struct(
            dict(self.PARAMS, **params))
        if backend is not None:
            s._datasource_backend = backend
        seen = {}
        real = relief.choose

        def choose(instances, *args):
            result = real(instances, *args)
            seen['instances'] = {i.uuid: i for i in instances}
            seen['pressures'] = args[3]
            seen['reasons'] = result[1]
            return result

        self.strategy = s
        if not execute:
            return s
        with mock.patch.object(strategy.relief, 'choose', choose):
            s.do_execute()
        return s.solution.actions, seen

    def gnocchi(self, **facts):
        return meters.Meters(gnocchi_path.Datasource(gnocchi_points(**facts)))

    @staticmethod
    def moved(actions):
        return [a['input_parameters']['resource_id'] for a in actions]

    @staticmethod
    def facts(seen):
        return {uuid: (i.bandwidth, i.level)
                for uuid, i in seen['instances'].items()}


@testtools.skipIf(strategy is None, 'python-watcher is not installed')
class TestPrometheus(PrometheusCase):

    def test_same_numbers_and_plan_as_through_gnocchi(self):
        self.serve()
        by_gnocchi, seen_gnocchi = self.run_strategy(backend=self.gnocchi())
        by_prometheus, seen = self.run_strategy()
        self.assertEqual(['low-2'], self.moved(by_prometheus))
        self.assertEqual(by_gnocchi, by_prometheus)
        self.assertEqual(self.facts(seen_gnocchi), self.facts(seen))
        self.assertEqual((1.5 * GB, 10.0), self.facts(seen)['low-2'])
        self.assertEqual((None, None), self.facts(seen)['normal'])
        # The most pressed domain of compute1; Gnocchi has no pressure.
        self.assertEqual({'compute1': 0.97}, seen['pressures'])
        self.assertIsNone(seen_gnocchi['pressures'])
        self.assertIn('pressure by memory bandwidth domain 0: 0.970, '
                      '1: 0.400', self.logger.output)
        self.assertIn('all at the floor 10, pressure 0.97',
                      seen['reasons']['compute1'])
        self.assertEqual('prometheus', self.strategy.datasource_backend.NAME)

    def test_the_agents_label_or_another(self):
        # Series relabelled "vm" at scrape: the audit names the label.
        self.serve(label='vm')
        actions, seen = self.run_strategy(instance_label='vm')
        self.assertEqual(['low-2'], self.moved(actions))
        self.assertEqual(1.5 * GB, seen['instances']['low-2'].bandwidth)
        # The agent's own label matches nothing here: no measure at all.
        e = self.assertRaises(strategy.NoMeasure, self.run_strategy)
        self.assertIn('no rdt_virt_instance_memory_bandwidth_total_bytes_'
                      'per_second measure of any of 3 high or low '
                      'instances (low-1, low-2, protected)', str(e))
        self.assertIn('in prometheus', str(e))
        self.assertIn('labelled instance_uuid=', str(e))

    def test_pressure_under_the_threshold(self):
        self.serve(pressures={'compute1': {'0': 0.5}})
        actions, seen = self.run_strategy()
        self.assertEqual([], actions)
        self.assertEqual('memory bandwidth pressure 0.50 is under the '
                         'threshold 0.85', seen['reasons']['compute1'])
        # 0: pressure is not read, the plan is Gnocchi's.
        actions, seen = self.run_strategy(pressure_threshold=0)
        self.assertEqual(['low-2'], self.moved(actions))
        self.assertIsNone(seen['pressures'])

    def test_let_go_during_the_period(self):
        # low-2 was held only for the last 300 s of the 600 s.
        self.serve(throttled={'low-2': lambda age: 1 if age < 300 else 0})
        actions, seen = self.run_strategy()
        self.assertEqual([], actions)
        self.assertEqual(float('inf'), seen['instances']['low-2'].level)
        self.assertIn('the host can still throttle low-2',
                      seen['reasons']['compute1'])
        # Held all through a shorter period: at the floor.
        actions, _ = self.run_strategy(period=240.0)
        self.assertEqual(['low-2'], self.moved(actions))

    def serve_moved(self, moved):
        """low-2 moved ``moved`` s ago from the 20% group to the floor's.

        Its old group's series (throttled, at 20%) ends there, its new
        one (at 10%) begins.
        """
        new = lambda age: 10.0 if age < moved else None  # noqa: E731
        series = agent_series(levels={'low-1': 10.0, 'low-2': new},
                              throttled={'low-2': lambda age: new(age)
                                         and 1.0})
        for metric, labels, _value in list(series):
            if (metric in (LEVEL, THROTTLED) and
                    labels['instance_uuid'] == 'low-2'):
                series.append((metric, dict(labels, group='rdtvirt-mb20'),
                               lambda age, m=metric: None if age < moved
                               else 20.0 if m == LEVEL else 1.0))
        self.server = self.useFixture(promserver.Prometheus(series, HOSTS))
        self.flags(group='prometheus_client', host='127.0.0.1',
                   port=str(self.server.port))

    def cloud_flow_waits(self):
        """{uuid: whether the test cloud's class step finds it at floor}."""
        def prom_api(flow, path):
            return self.server.get(path)['data']
        with mock.patch.object(flow_prometheus, 'prom_api', prom_api):
            return {uuid: flow_watcher._at_floor_in_window(None, uuid)
                    for uuid in ('low-1', 'low-2')}

    def test_the_cloud_flow_waits_for_what_the_strategy_reads(self):
        # The class step of the test cloud (rdt_virt.cloud.flow_watcher)
        # waits until Prometheus has every low server at the floor for
        # the audit's window, then runs the audit. A server that reached
        # the floor's group half a window ago has that group's series at
        # the floor all through the window, but its old group's is in the
        # window too: the strategy reads a mean above the floor, and the
        # flow must wait as well.
        period = flow_watcher.CLASS_PERIOD
        window = dict(period=period, granularity=period)
        self.serve_moved(period // 2)
        _, seen = self.run_strategy(**window)
        self.assertGreater(seen['instances']['low-2'].level, 10.0)
        self.assertEqual(10.0, seen['instances']['low-1'].level)
        self.assertEqual({'low-1': True, 'low-2': False},
                         self.cloud_flow_waits())
        # A window and a half later the old series has left it.
        self.serve_moved(period * 3 // 2)
        _, seen = self.run_strategy(**window)
        self.assertEqual(10.0, seen['instances']['low-2'].level)
        self.assertEqual({'low-1': True, 'low-2': True},
                         self.cloud_flow_waits())

    def test_a_host_without_its_label_has_no_pressure(self):
        # The scrape job of compute1 does not set fqdn to its name.
        self.serve(hosts={'compute1': {'fqdn': 'node-17.example.com'},
                          'compute2': HOSTS['compute2']})
        actions, seen = self.run_strategy()
        self.assertEqual([], actions)
        self.assertEqual({'compute1': None}, seen['pressures'])
        self.assertEqual("no measure of the host's memory bandwidth "
                         "pressure", seen['reasons']['compute1'])
        self.assertIn('No memory bandwidth pressure of compute1 in '
                      'prometheus: no active prometheus target has '
                      'fqdn=compute1', self.logger.output)

    def test_prometheus_stops_answering(self):
        server = self.serve()
        s = self.run_strategy(execute=False)
        s.datasource_backend
        server.stop()
        e = self.assertRaises(strategy.NoMeasure, s.do_execute)
        self.assertIn('Connection refused', str(e))
        self.assertEqual([], s.solution.actions)

    def test_the_audits_order_of_datasources(self):
        self.serve()
        # Aetos first, but not in Keystone's catalog: Prometheus is next.
        broken = OpenStackClients(ks_session.Session(
            auth=RecordingToken(None, 'token')))
        actions, _ = self.run_strategy(
            config_datasources=['gnocchi'], osc=broken,
            datasources=['grafana', 'aetos', 'prometheus'])
        self.assertEqual(['low-2'], self.moved(actions))
        self.assertEqual('prometheus', self.strategy.datasource_backend.NAME)
        self.assertIn('passes over datasource aetos', self.logger.output)
        self.assertIn('passes over datasource grafana: not read by '
                      'rdt_noisy_neighbor', self.logger.output)

    def test_strategy_state_lists_the_agents_series(self):
        self.serve()
        s = self.run_strategy(execute=False)
        state = strategy_base.StrategyEndpoint(None)._collect_metrics(
            s, s.datasource_backend)
        self.assertEqual([{BW: 'available'}, {LEVEL: 'available'},
                          {THROTTLED: 'available'},
                          {PRESSURE: 'available'}], state['state'])


@testtools.skipIf(strategy is None, 'python-watcher is not installed')
class TestNoDatasource(base.TestCase):

    def test_prometheus_not_configured(self):
        s = strategy.RDTNoisyNeighbor(config=watcher_utils.Struct(
            datasources=['grafana', 'prometheus']))
        s._compute_model = gnocchi_path.build_model()
        s.input_parameters = watcher_utils.Struct({})
        e = self.assertRaises(strategy.NoDatasource, s.do_execute)
        self.assertIn('no datasource to read memory bandwidth from, in the '
                      'order grafana, prometheus: grafana: not read by '
                      'rdt_noisy_neighbor; prometheus: ', str(e))
        self.assertIn('[prometheus_client]', str(e))
        self.assertEqual([], s.solution.actions)


@testtools.skipIf(strategy is None, 'python-watcher is not installed')
@testtools.skipIf(aetos is None, 'Watcher 14 (2025.1) has no Aetos '
                                 'datasource')
class TestAetos(PrometheusCase):
    """The same strategy through Watcher's Aetos helper."""

    def aetos_osc(self):
        self.keystone = RecordingToken(self.server.url, 'token')
        return OpenStackClients(ks_session.Session(auth=self.keystone))

    def test_same_plan_through_keystone(self):
        self.serve()
        self.flags(group='aetos_client', interface='internal',
                   region_name='RegionTwo')
        by_gnocchi, seen_gnocchi = self.run_strategy(backend=self.gnocchi())
        actions, seen = self.run_strategy(config_datasources=['aetos'],
                                          osc=self.aetos_osc())
        self.assertEqual('aetos', self.strategy.datasource_backend.NAME)
        self.assertEqual(by_gnocchi, actions)
        self.assertEqual(self.facts(seen_gnocchi), self.facts(seen))
        self.assertEqual({'compute1': 0.97}, seen['pressures'])
        # The helper found Aetos in the catalog as Watcher configures it,
        # and every request carried the session's token.
        self.assertEqual([{'service_type': 'metric-storage',
                           'interface': 'internal',
                           'region_name': 'RegionTwo'}],
                         [{k: v for k, v in lookup.items()
                           if k in ('service_type', 'interface',
                                    'region_name')}
                          for lookup in self.keystone.lookups])
        self.assertGreater(self.keystone.tokens, 0)
