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

"""Merging rdt-virt's Gnocchi resource definitions into Ceilometer's."""

import io
import os

import fixtures
import yaml

from rdt_virt.telemetry import gnocchi
from tests import base

METERS = ['memory.bandwidth.total', 'memory.bandwidth.local', 'cpu_l3_cache',
          'cpu.core.power', 'cpu.core.energy', 'cpu.core.activity',
          'memory.bandwidth.limit']

BASE = {
    'archive_policy_default': 'ceilometer-low',
    'resources': [
        {'resource_type': 'identity', 'metrics': {'identity.authenticate'
                                                  '.success': None}},
        {'resource_type': 'instance',
         'metrics': {'memory': None,
                     'cpu': {'archive_policy_name': 'ceilometer-low-rate'}},
         'attributes': {'host': 'resource_metadata.(instance_host|host)'}},
    ],
}


class TestMerge(base.TestCase):

    def fragment(self):
        return gnocchi.load(gnocchi.fragment_path())

    def test_fragment_defines_the_meters_on_instance(self):
        frag = self.fragment()
        self.assertEqual(['instance'],
                         [r['resource_type'] for r in frag['resources']])
        self.assertEqual(METERS, list(frag['resources'][0]['metrics']))

    def test_adds_metrics_to_instance_and_keeps_the_rest(self):
        merged, added = gnocchi.merge(BASE, self.fragment())
        self.assertEqual(METERS, added)
        instance = merged['resources'][1]
        self.assertEqual(['memory', 'cpu'] + METERS, list(instance['metrics']))
        self.assertEqual({'archive_policy_name': 'ceilometer-low-rate'},
                         instance['metrics']['cpu'])
        self.assertEqual(BASE['resources'][1]['attributes'],
                         instance['attributes'])
        self.assertEqual(BASE['resources'][0], merged['resources'][0])
        # The input is left alone.
        self.assertEqual(['memory', 'cpu'],
                         list(BASE['resources'][1]['metrics']))

    def test_idempotent(self):
        once, _ = gnocchi.merge(BASE, self.fragment())
        twice, added = gnocchi.merge(once, self.fragment())
        self.assertEqual([], added)
        self.assertEqual(once, twice)

    def test_an_existing_definition_wins(self):
        base = {'resources': [{'resource_type': 'instance', 'metrics': {
            'cpu_l3_cache': {'archive_policy_name': 'high'}}}]}
        merged, added = gnocchi.merge(base, self.fragment())
        self.assertEqual([m for m in METERS if m != 'cpu_l3_cache'], added)
        self.assertEqual({'archive_policy_name': 'high'},
                         merged['resources'][0]['metrics']['cpu_l3_cache'])

    def test_missing_resource_type_is_appended(self):
        merged, added = gnocchi.merge(
            {'resources': [BASE['resources'][0]]}, self.fragment())
        self.assertEqual(METERS, added)
        self.assertEqual('instance', merged['resources'][1]['resource_type'])

    def test_command_writes_then_keeps_the_output(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        src = os.path.join(tmp, 'ceilometer.yaml')
        with open(src, 'w') as f:
            yaml.safe_dump(BASE, f)
        dst = os.path.join(tmp, 'gnocchi_resources.yaml')
        out = io.StringIO()
        self.assertEqual(0, gnocchi.main(['--base', src, '--output', dst],
                                         out=out))
        self.assertIn('added memory.bandwidth.total', out.getvalue())
        with open(dst) as f:
            written = yaml.safe_load(f)
        self.assertEqual(METERS, list(written['resources'][1]['metrics'])[2:])
        # A second run merges into the output itself and changes nothing.
        before = os.stat(dst).st_mtime_ns
        out = io.StringIO()
        self.assertEqual(0, gnocchi.main(['--output', dst], out=out))
        self.assertIn('already defines every rdt-virt meter', out.getvalue())
        self.assertEqual(before, os.stat(dst).st_mtime_ns)

    def test_bad_base_is_an_error(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        src = os.path.join(tmp, 'bad.yaml')
        with open(src, 'w') as f:
            f.write('just a string\n')
        err = self.useFixture(fixtures.StringStream('stderr'))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err.stream))
        self.assertEqual(1, gnocchi.main(
            ['--base', src, '--output', os.path.join(tmp, 'out.yaml')]))
        self.assertIn('has no list of resources', err.getDetails()[
            'stderr'].as_text())
        self.assertFalse(os.path.exists(os.path.join(tmp, 'out.yaml')))
