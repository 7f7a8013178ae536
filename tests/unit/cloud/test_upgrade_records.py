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

import os
import time

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
