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

"""The PromQL the strategy asks, and how it reads the answers.

A real Prometheus answers them in tests/watcher/test_prometheus.py; here
the client's answers are given, as python-observabilityclient returns
them (samples with ``labels`` and a string ``value``).
"""

import collections
import datetime
import math

from tests import base
from watcher_plugin import meters
from watcher_plugin import promql

Sample = collections.namedtuple('Sample', 'labels value')
Server = collections.namedtuple('Server', 'uuid name')
Node = collections.namedtuple('Node', 'hostname')

WIN = meters.Window(datetime.datetime(2026, 1, 1), 600.0, 300.0, False)
BW = ('sum(sum_over_time(rdt_virt_instance_memory_bandwidth_total_bytes_'
      'per_second{instance_uuid="u1"}[600s])) / sum(count_over_time('
      'rdt_virt_instance_memory_bandwidth_total_bytes_per_second'
      '{instance_uuid="u1"}[600s]))')
HELD = ('min(min_over_time(rdt_virt_instance_controller_throttled'
        '{instance_uuid="u1"}[600s]))')
LEVEL = ('sum(sum_over_time(rdt_virt_instance_controller_level'
         '{instance_uuid="u1"}[600s])) / sum(count_over_time('
         'rdt_virt_instance_controller_level{instance_uuid="u1"}[600s]))')
PRESSURE = ('max by (domain) (avg_over_time('
            'rdt_virt_domain_bandwidth_pressure_ratio'
            '{fqdn="compute1.example.com"}[600s]))')


class Client(object):
    def __init__(self, answers):
        self.answers = answers
        self.queries = []

    def query(self, query):
        self.queries.append(query)
        answer = self.answers.get(query, [])
        if isinstance(answer, Exception):
            raise answer
        return answer


class Helper(object):
    NAME = 'prometheus'
    prometheus_fqdn_label = 'fqdn'

    def __init__(self, answers, hosts=('compute1.example.com',)):
        self.prometheus = Client(answers)
        self.hosts = hosts

    def _resolve_prometheus_instance_label(self, hostname):
        for fqdn in self.hosts:
            if hostname in (fqdn, fqdn.split('.')[0]):
                return fqdn
        return None


def reader(answers, **kwargs):
    return promql.PromQLMeters(Helper(answers), **kwargs)


class TestQueries(base.TestCase):

    def test_bandwidth_is_the_mean_of_every_sample(self):
        r = reader({BW: [Sample({}, '1.5e9')]})
        self.assertEqual(meters.measured(1.5e9),
                         r.bandwidth(Server('u1', 'low-1'), WIN))
        self.assertEqual([BW], r.client.queries)

    def test_instance_label_and_quoting(self):
        r = reader({}, instance_label='resource')
        r.bandwidth(Server('a"b\\c', 'x'), WIN)
        self.assertIn('{resource="a\\"b\\\\c"}[600s]', r.client.queries[0])
        self.assertEqual('901s', promql.duration(900.2))
        self.assertEqual('1s', promql.duration(0))

    def test_no_sample_is_absent_and_an_error_is_a_failure(self):
        r = reader({BW: [Sample({}, 'NaN')]})
        reading = r.bandwidth(Server('u1', 'low-1'), WIN)
        self.assertEqual((None, False), (reading.value, reading.failed))
        self.assertIn('no sample', reading.missing)
        r = reader({BW: IOError('Connection refused')})
        reading = r.bandwidth(Server('u1', 'low-1'), WIN)
        self.assertEqual((None, True), (reading.value, reading.failed))
        self.assertIn('Connection refused', reading.missing)

    def test_level_held_all_through_the_period(self):
        r = reader({HELD: [Sample({}, '1')], LEVEL: [Sample({}, '10')]})
        self.assertEqual(meters.measured(10.0),
                         r.level(Server('u1', 'low-1'), WIN))
        self.assertEqual([HELD, LEVEL], r.client.queries)

    def test_level_let_go_during_the_period(self):
        r = reader({HELD: [Sample({}, '0')], LEVEL: [Sample({}, '10')]})
        self.assertEqual(meters.measured(math.inf),
                         r.level(Server('u1', 'low-1'), WIN))
        self.assertEqual([HELD], r.client.queries)

    def test_level_of_an_instance_the_agent_does_not_control(self):
        reading = reader({}).level(Server('u1', 'low-1'), WIN)
        self.assertEqual((None, False), (reading.value, reading.failed))

    def test_held_without_a_level_is_a_failure(self):
        reading = reader({HELD: [Sample({}, '1')]}).level(
            Server('u1', 'low-1'), WIN)
        self.assertTrue(reading.failed)
        self.assertIn('held all through the window but no level',
                      reading.missing)

    def test_pressure_of_the_most_pressed_domain(self):
        r = reader({PRESSURE: [Sample({'domain': '0'}, '0.97'),
                               Sample({'domain': '1'}, '0.4')]})
        self.assertEqual(meters.measured(0.97),
                         r.pressure(Node('compute1'), WIN))

    def test_pressure_of_a_host_without_its_label(self):
        r = reader({PRESSURE: [Sample({'domain': '0'}, '0.97')]})
        reading = r.pressure(Node('compute9'), WIN)
        self.assertTrue(reading.failed)
        self.assertIn('no active prometheus target has fqdn=compute9',
                      reading.missing)
        self.assertEqual([], r.client.queries)

    def test_needs_names_the_series_and_the_label(self):
        text = reader({}).needs(meters.BANDWIDTH, WIN)
        self.assertIn('rdt_virt_instance_memory_bandwidth_total_bytes_per_'
                      'second samples labelled instance_uuid=', text)
        self.assertIn('[prometheus_client]', text)
