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

"""The upgrade's readers of the hosts' files, on fixture trees."""

import http.server
import json
import os
import threading
import time
import urllib.parse

import fixtures

from rdt_virt.cloud import services
from rdt_virt.cloud import upgrade
from rdt_virt.cloud import upgrade_records as records
from rdt_virt.sandbox import guest
from tests import base

REFERENCE = os.path.join(base.FIXTURES_DIR, 'resctrl', 'reference')
QEMU = 'qemu-1-instance-00000001-vcpus_0-1'


class TestResctrl(base.TestCase):

    def test_groups_are_the_directories_that_are_control_groups(self):
        self.assertEqual(['batch', QEMU, 'rdtvirt-mb10'],
                         records.groups(REFERENCE))

    def test_threads_of_the_groups_kept(self):
        self.assertEqual({'4101': QEMU, '4102': QEMU, '5001': 'batch',
                          '5002': 'batch'},
                         records.threads(REFERENCE, upgrade.static_group))
        self.assertEqual('rdtvirt-mb10',
                         records.threads(REFERENCE)['4301'])

    def test_schemata_of_every_group(self):
        found = records.schemata(REFERENCE)
        self.assertEqual(['batch', QEMU, 'rdtvirt-mb10'], sorted(found))
        self.assertIn('L3:0=003;1=7f0', found[QEMU])

    def test_alive_threads(self):
        self.assertEqual({str(os.getpid())},
                         records.alive([str(os.getpid()), '999999999']))


class TestWork(base.TestCase):

    def test_units_from_the_console_log_in_the_instance_directory(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        layout = services.Layout(tmp, ports={})
        self.assertIsNone(records.work_units(layout, 'compute1', 'u1'))
        path = os.path.join(services.instances_dir(layout, 'compute1'),
                            'u1', 'console.log')
        os.makedirs(os.path.dirname(path))
        with open(path, 'w') as f:
            f.write('SeaBIOS\n%s\n.....' % guest.WORK_BANNER)
        self.assertEqual(5, records.work_units(layout, 'compute1', 'u1'))


class TestExporter(base.TestCase):

    def _url(self, text):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'metrics')
        with open(path, 'w') as f:
            f.write(text)
        return 'file://' + path

    def test_the_agents_counters(self):
        url = self._url(
            '# TYPE rdt_virt_agent_ticks_total counter\n'
            'rdt_virt_agent_ticks_total 1.0\n'
            '# TYPE rdt_virt_agent_writes_total counter\n'
            'rdt_virt_agent_writes_total 0.0\n'
            '# TYPE other gauge\nother{x="1"} 3.0\n')
        found = records.exporter(url, ('rdt_virt_agent_ticks_total',
                                       'rdt_virt_agent_writes_total'))
        self.assertEqual({('rdt_virt_agent_ticks_total', ()): 1.0,
                          ('rdt_virt_agent_writes_total', ()): 0.0}, found)

    def test_an_exporter_that_does_not_answer(self):
        self.assertIsNone(records.exporter('file:///nonexistent/metrics',
                                           ('x',)))


class TestPrometheus(base.TestCase):
    """Raw samples from Prometheus's query API, as it answers."""

    def setUp(self):
        super().setUp()
        self.queries = []
        test = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                test.queries.append(urllib.parse.parse_qs(
                    urllib.parse.urlsplit(self.path).query))
                body = json.dumps({'status': 'success', 'data': {
                    'resultType': 'matrix', 'result': [
                        {'metric': {'__name__': 'rdt_virt_instance_monitored',
                                    'instance_uuid': 'u1'},
                         'values': [[100.5, '1'], [105.5, '0']]}]}})
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.layout = services.Layout('/nonexistent', {
            'prometheus': server.server_address[1]})

    def test_samples_with_their_values(self):
        found = records.prometheus_samples(
            self.layout, 'rdt_virt_instance_monitored', 90.0, 110.0)
        self.assertEqual([({'__name__': 'rdt_virt_instance_monitored',
                            'instance_uuid': 'u1'},
                           [(100.5, 1.0), (105.5, 0.0)])], found)
        # A range vector over the window, at its end: raw scrapes only.
        self.assertEqual(['rdt_virt_instance_monitored[20s]'],
                         self.queries[0]['query'])
        self.assertEqual(['110.000'], self.queries[0]['time'])

    def test_series_are_the_samples_times(self):
        self.assertEqual(
            [({'__name__': 'rdt_virt_instance_monitored',
               'instance_uuid': 'u1'}, [100.5, 105.5])],
            records.prometheus_series(self.layout, 'x', 90.0, 110.0))


class TestSampler(base.TestCase):

    def test_readings_and_failures_in_order(self):
        values = iter([1, ValueError('restarting'), 3])

        def read():
            value = next(values, 4)
            if isinstance(value, Exception):
                raise value
            return value
        sampler = records.Sampler(read, 0.01)
        sampler.start()
        while len(sampler.samples) < 4:
            time.sleep(0.01)
        samples = sampler.stop()
        self.assertEqual([1, None, 3, 4], [v for _, v in samples[:4]])
        times = [t for t, _ in samples]
        self.assertEqual(sorted(times), times)

    def test_a_sampler_never_started_stops(self):
        self.assertEqual([], records.Sampler(lambda: 1, 1.0).stop())
