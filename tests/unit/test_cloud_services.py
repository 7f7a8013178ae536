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

"""The test cloud's nova-compute configuration."""

import configparser
import inspect
import os

import fixtures
import yaml

from rdt_virt.cloud import process
from rdt_virt.cloud import services
from tests import base


class TestNovaCompute(base.TestCase):

    def test_sigterm_stops_nova_compute_before_the_cloud_kills_it(self):
        # Nova 34's nova-compute only leaves its graceful shutdown when a
        # timeout gives up on its libvirt connection-event loop (see
        # services.nova_compute): those timeouts must end before
        # Daemons.stop sends SIGKILL.
        tmp = self.useFixture(fixtures.TempDir()).path
        layout = services.Layout(tmp, ports={})
        os.makedirs(layout.etc('nova'))
        with open(layout.etc('nova', 'nova.conf'), 'w') as f:
            f.write('[DEFAULT]\ndebug = True\n')
        path = services.nova_compute(layout, 'compute1',
                                     os.path.join(tmp, 'sandbox'))
        conf = configparser.ConfigParser()
        conf.read(path)
        manager = conf.getint('DEFAULT', 'manager_shutdown_timeout')
        graceful = conf.getint('DEFAULT', 'graceful_shutdown_timeout')
        kill_after = inspect.signature(process.Daemons.stop).parameters[
            'timeout'].default
        # The RPC servers' stop follows the manager's step (10 s, as Nova
        # leaves when it caps the manager's share); oslo.service's alarm
        # ends the process at graceful.
        self.assertLessEqual(manager, graceful - 10)
        self.assertLess(graceful, kill_after)
        self.assertEqual('compute1', conf.get('DEFAULT', 'host'))


class TestArchivePolicy(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.tmp, 'gnocchi_resources.yaml')
        self.original = {
            'archive_policy_default': 'ceilometer-low',
            'archive_policies': [{'name': 'ceilometer-low',
                                  'aggregation_methods': ['mean'],
                                  'back_window': 0,
                                  'definition': [{'granularity': '5 minutes',
                                                  'timespan': '30 days'}]}],
            'resources': [{'resource_type': 'instance',
                           'metrics': {'memory.bandwidth.total': None}}]}
        with open(self.path, 'w') as f:
            yaml.safe_dump(self.original, f)

    def load(self):
        with open(self.path) as f:
            return yaml.safe_load(f)

    def test_the_policy_joins_the_definitions_once(self):
        services.add_archive_policy(self.path)
        services.add_archive_policy(self.path)
        data = self.load()
        self.assertEqual(['ceilometer-low', services.ARCHIVE_POLICY['name']],
                         [p['name'] for p in data['archive_policies']])
        self.assertEqual(self.original['resources'], data['resources'])
        self.assertEqual('ceilometer-low', data['archive_policy_default'])

    def test_it_keeps_the_audits_granularity_and_a_finer_one(self):
        seconds = {'1 minute': 60, '5 minutes': 300}
        kept = [seconds[d['granularity']]
                for d in services.ARCHIVE_POLICY['definition']]
        self.assertEqual(sorted([services.FINE, services.COARSE]),
                         sorted(kept))
        self.assertIn('mean', services.ARCHIVE_POLICY['aggregation_methods'])

    def test_the_publisher_names_it(self):
        layout = services.Layout(self.tmp, ports=dict.fromkeys(
            services.PORTS, 1))
        conf = configparser.ConfigParser(interpolation=None)
        conf.read(services.ceilometer(layout))
        with open(conf.get('DEFAULT', 'pipeline_cfg_file')) as f:
            pipeline = yaml.safe_load(f)
        url = pipeline['sinks'][0]['publishers'][0]
        self.assertIn('archive_policy=%s&' % services.ARCHIVE_POLICY['name'],
                      url)
