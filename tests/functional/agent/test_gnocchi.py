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

"""rdt-virt's meters reach a real Gnocchi through Ceilometer's pipeline.

The agent samples the emulated host; Ceilometer's polling manager runs the
pollsters and sends the samples as notifications (oslo.messaging's
in-process transport), Ceilometer's notification service turns them into
samples and its Gnocchi publisher writes them to a real Gnocchi (API under
uWSGI, metricd, indexer in a private PostgreSQL cluster, file storage).
With Ceilometer's own resource definitions the publisher drops the
samples; with rdt-virt's merged in they land on the instance resources.

Gnocchi runs from its own environment (``tox -e gnocchi``, or the bin
directory in ``RDT_VIRT_GNOCCHI_BIN``); without it the tests skip, except
under CI where they fail.
"""

import logging
import os
import shutil
import tempfile
import time

import fixtures
from keystoneauth1 import loading as ka_loading
import oslo_messaging

from rdt_virt.cloud import gnocchi as gnocchi_svc
from rdt_virt.cloud import postgres
from rdt_virt.cloud import process
from rdt_virt.telemetry import gnocchi as definitions
from tests.functional.agent import test_telemetry

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
METERS = ('memory.bandwidth.total', 'memory.bandwidth.local', 'cpu_l3_cache')
IMAGE = '9b6b0d4c-6a3e-4b5c-8f43-7c4e7d5f0a11'


def gnocchi_bin():
    path = os.environ.get('RDT_VIRT_GNOCCHI_BIN') or os.path.join(
        REPO, '.tox', 'gnocchi', 'bin')
    return path if os.path.exists(os.path.join(path, 'gnocchi-api')) \
        else None


class GnocchiTestCase(test_telemetry.CeilometerTestCase):

    FLAVOR = test_telemetry.CeilometerTestCase.FLAVOR + (
        '<nova:root type="image" uuid="%s"/>' % IMAGE)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bin = gnocchi_bin()
        if not cls.bin:
            return
        # PostgreSQL runs as its own user: the tree must be readable.
        cls.dir = tempfile.mkdtemp(prefix='rdt-gnocchi-', dir='/tmp')
        os.chmod(cls.dir, 0o755)
        cls.daemons = process.Daemons(os.path.join(cls.dir, 'run'),
                                      os.path.join(cls.dir, 'log'))
        try:
            cls.pg = postgres.Cluster(cls.daemons,
                                      os.path.join(cls.dir, 'pg'),
                                      process.free_port()).start()
            url = cls.pg.create_database('gnocchi')
            conf = gnocchi_svc.write_conf(
                os.path.join(cls.dir, 'gnocchi.conf'),
                url.replace('+psycopg2', ''), os.path.join(cls.dir, 'data'),
                processing_delay=1)
            cls.gnocchi = gnocchi_svc.Gnocchi(cls.daemons, cls.bin, conf,
                                              process.free_port())
            cls.gnocchi.upgrade()
            cls.gnocchi.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, 'bin', None):
            if getattr(cls, 'gnocchi', None):
                cls.gnocchi.stop()
            if getattr(cls, 'pg', None):
                cls.pg.stop()
            shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        if not self.bin:
            if os.environ.get('CI'):
                self.fail('Gnocchi is not installed: run tox -e gnocchi '
                          '--notest first')
            self.skipTest('Gnocchi is not installed (tox -e gnocchi)')
        super().setUp()
        from ceilometer import gnocchi_client
        from ceilometer import messaging
        from ceilometer import notification
        self.notification = notification
        conf = self.conf
        tmp = self.useFixture(fixtures.TempDir()).path
        self.definitions = os.path.join(tmp, 'gnocchi_resources.yaml')
        pipeline = os.path.join(tmp, 'pipeline.yaml')
        with open(pipeline, 'w') as f:
            f.write('sources:\n'
                    '  - name: meter_source\n'
                    '    meters: ["*"]\n'
                    '    sinks: [meter_sink]\n'
                    'sinks:\n'
                    '  - name: meter_sink\n'
                    '    publishers:\n'
                    '      - gnocchi://?enable_filter_project=false'
                    '&archive_policy=ceilometer-low'
                    '&resources_definition_file=%s\n' % self.definitions)
        conf.set_override('pipeline_cfg_file', pipeline)
        conf.set_override('pipelines', ['meter'], 'notification')
        conf.set_override('enable_notifications', True, 'polling')
        # Registers the transport options as a side effect.
        oslo_messaging.get_notification_transport(conf, url='fake:/')
        conf.set_override('transport_url', 'fake:/')
        # Gnocchi's basic authentication through its keystoneauth plugin
        # (whose options a configuration file would register on loading).
        conf.register_opts(ka_loading.get_auth_plugin_conf_options(
            'gnocchi-basic'), 'service_credentials')
        for key, value in (('auth_type', 'gnocchi-basic'),
                           ('user', 'admin'),
                           ('endpoint', self.gnocchi.endpoint)):
            conf.set_override(key, value, 'service_credentials')
        self.addCleanup(self.cleanup_transports, messaging)
        # What ceilometer-upgrade does: Ceilometer's resource types.
        gnocchi_client.upgrade_resource_types(conf)
        self.client = gnocchi_client.get_gnocchiclient(conf)
        self.logger = self.useFixture(fixtures.FakeLogger(
            level=logging.WARNING, format='%(levelname)s %(message)s'))

    @staticmethod
    def cleanup_transports(messaging):
        # Ceilometer's messaging.cleanup() deletes from the dict it
        # iterates over: it fails with more than one transport cached.
        for transport in messaging.TRANSPORTS.values():
            transport.cleanup()
        messaging.TRANSPORTS.clear()

    def poll_into_gnocchi(self):
        """One polling cycle, through the notification service."""
        self.agent.sample()
        self.sample_after()
        service = self.notification.NotificationService(0, self.conf)
        service.run()
        self.addCleanup(service.kill_listeners, service.listeners)
        mgr = self.manager.AgentManager(0, self.conf,
                                        namespaces=['compute'])
        mgr.polling_manager = self.manager.PollingManager(self.conf)
        for task in mgr.setup_polling_tasks().values():
            mgr.interval_task(task)
        return service

    def resource(self, uuid, timeout=60.0):
        """The instance resource, once it has the rdt-virt metrics.

        The publisher creates the resource, then its metrics: wait for
        both (or the timeout) and return what there is.
        """
        from gnocchiclient import exceptions
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.client.resource.get('instance', uuid)
            except exceptions.ResourceNotFound:
                found = None
            if (found and set(METERS) <= set(found['metrics']) or
                    time.monotonic() > deadline):
                self.assertIsNotNone(found, 'no instance resource %s' % uuid)
                return found
            time.sleep(0.5)

    def measures(self, uuid, meter, timeout=60.0):
        """The aggregated measures of one metric, once there are some."""
        from gnocchiclient import exceptions
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.client.metric.get_measures(
                    meter, resource_id=uuid, refresh=True)
            except exceptions.NotFound:
                found = []
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


class TestGnocchi(GnocchiTestCase):

    def test_meters_land_on_the_instance_resources(self):
        base = definitions.ceilometer_default_path()
        self.assertEqual(0, definitions.main(
            ['--base', base, '--output', self.definitions],
            out=open(os.devnull, 'w')))
        self.poll_into_gnocchi()
        for uuid, (r0, r1) in zip(self.uuids, test_telemetry.RATES):
            resource = self.resource(uuid)
            self.assertTrue(set(METERS) <= set(resource['metrics']),
                            resource['metrics'])
            self.assertEqual('42', resource['flavor_id'])
            self.assertEqual('vm-%d' % self.uuids.index(uuid),
                             resource['display_name'])
            total = self.measures(uuid, 'memory.bandwidth.total')
            self.assertTrue(total, 'no measures for %s' % uuid)
            # (timestamp, granularity, value): the agent's rate, within 1%.
            value = total[-1][2]
            self.assertLess(abs(value - (r0 + r1)), 0.01 * (r0 + r1))
            local = self.measures(uuid, 'memory.bandwidth.local')
            self.assertLess(abs(local[-1][2] - (r0 + r1) / 2),
                            0.01 * (r0 + r1))
            self.assertTrue(self.measures(uuid, 'cpu_l3_cache'))
        metric = self.client.metric.get('memory.bandwidth.total',
                                        resource_id=self.uuids[0])
        self.assertEqual('B/s', metric['unit'])
        self.assertNotIn('is not handled by Gnocchi', self.logger.output)

    def test_ceilometer_definitions_alone_drop_the_meters(self):
        shutil.copy(definitions.ceilometer_default_path(), self.definitions)
        self.poll_into_gnocchi()
        warnings = ['metric %s is not handled by Gnocchi' % meter
                    for meter in METERS]
        deadline = time.monotonic() + 60
        while (not all(w in self.logger.output for w in warnings) and
               time.monotonic() < deadline):
            time.sleep(0.2)
        for warning in warnings:
            self.assertIn(warning, self.logger.output)
        from gnocchiclient import exceptions
        for uuid in self.uuids:
            self.assertRaises(exceptions.ResourceNotFound,
                              self.client.resource.get, 'instance', uuid)


class TestGnocchiCoreEnergy(GnocchiTestCase):
    """The cpu.core.* meters of an AET host land on the instances."""

    profile = 'aet'
    ENERGY = ('cpu.core.power', 'cpu.core.energy', 'cpu.core.activity')

    def test_core_energy_meters_land_on_the_instance_resources(self):
        from tests.functional.agent import test_energy
        self.assertEqual(0, definitions.main(
            ['--base', definitions.ceilometer_default_path(), '--output',
             self.definitions], out=open(os.devnull, 'w')))
        test_energy.EnergyMixin.inject_power(self)
        self.poll_into_gnocchi()
        for uuid, (w0, w1) in zip(self.uuids, test_energy.WATTS):
            power = self.measures(uuid, 'cpu.core.power')
            self.assertTrue(power, 'no cpu.core.power for %s' % uuid)
            # Over the 2 s the pipeline samples; the 1% accuracy is
            # test_energy's, with longer intervals.
            self.assertLess(abs(power[-1][2] - (w0 + w1)), 0.02 * (w0 + w1))
            self.assertTrue(self.measures(uuid, 'cpu.core.energy'))
            self.assertTrue(self.measures(uuid, 'cpu.core.activity'))
        for meter, unit in zip(self.ENERGY, ('W', 'J', 'F/s')):
            metric = self.client.metric.get(meter,
                                            resource_id=self.uuids[0])
            self.assertEqual(unit, metric['unit'])
        self.assertNotIn('is not handled by Gnocchi', self.logger.output)
