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

"""The Prometheus endpoint serves the latest state document."""

import http.client
import os
import shutil
import ssl
import subprocess
import urllib.request

from tests import base
from tests.unit.telemetry import test_pollsters

UUID1 = test_pollsters.UUID1
UUID2 = test_pollsters.UUID2
PROJECT = 'f1e2d3c4b5a697887766554433221100'


class TestPrometheus(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            self.skipTest('prometheus-client is not installed')
        from rdt_virt.telemetry import prometheus
        self.prometheus = prometheus
        self.doc = test_pollsters.document(1000.0)
        # The second instance's domain names no project.
        self.doc['instances'][UUID1]['project_id'] = PROJECT
        self.doc['host'] = {'mbm_total_bps': 1.5e8, 'rmids_total': 176,
                            'rmids_used': 4, 'coverage': 0.5,
                            'rotating': True}

    @staticmethod
    def value(text, name, **labels):
        """One sample's value, read as a scraper reads it.

        prometheus-client releases write large floats differently (1.2e+10
        or 1.2e+010): compare those by value, not by text.
        """
        from prometheus_client import parser
        found = [s.value
                 for family in parser.text_string_to_metric_families(text)
                 for s in family.samples
                 if s.name == name and s.labels == labels]
        if len(found) != 1:
            raise AssertionError('%d samples %s%s'
                                 % (len(found), name, labels))
        return found[0]

    def text(self, doc=None, totals=None, names=True):
        from prometheus_client import exposition
        registry = self.prometheus.registry_for(
            lambda: self.doc if doc is None else doc, lambda: totals,
            instance_names=names)
        return exposition.generate_latest(registry).decode()

    def test_no_instance_names_by_default(self):
        self.doc['instances'][UUID2]['group'] = (
            'qemu-7-instance-2-vcpus_0-1')
        text = self.text(names=False)
        self.assertNotIn('instance-', text)
        self.assertNotIn('domain=', text)
        self.assertIn(
            'rdt_virt_instance_memory_bandwidth_total_bytes_per_second{'
            'group="rdtvirt-mb10",instance_uuid="%s",project="%s"} 1.5e+08'
            % (UUID1, PROJECT), text)
        self.assertIn('rdt_virt_instance_monitored{group="libvirt",'
                      'instance_uuid="%s",project=""} 0.0' % UUID2, text)

    def test_instance_metrics_labelled_by_uuid(self):
        text = self.text()
        self.assertIn(
            'rdt_virt_instance_memory_bandwidth_total_bytes_per_second{'
            'domain="instance-1",group="rdtvirt-mb10",instance_uuid="%s",'
            'project="%s"} 1.5e+08' % (UUID1, PROJECT), text)
        self.assertIn('rdt_virt_instance_llc_occupancy_bytes{domain='
                      '"instance-1",group="rdtvirt-mb10",instance_uuid="%s",'
                      'project="%s"} 4.194304e+06' % (UUID1, PROJECT), text)
        # No value: no sample, but the monitored flag says so.
        self.assertNotIn('bytes_per_second{domain="instance-2"', text)
        self.assertIn('rdt_virt_instance_monitored{domain="instance-2",'
                      'group="",instance_uuid="%s",project=""} 0.0' % UUID2,
                      text)

    def test_applied_policy_and_the_request(self):
        # hw:mem_bw=15 on a host with steps of 10: the group holds 20.
        self.doc['instances'][UUID1]['policy'] = {
            'mem_bw': 20, 'mem_bw_requested': 15, 'cache_l3': 3328}
        text = self.text(names=False)
        labels = ('group="rdtvirt-mb10",instance_uuid="%s",project="%s",'
                  'setting=' % (UUID1, PROJECT))
        self.assertIn('rdt_virt_instance_policy{%s"mem_bw"} 20.0' % labels,
                      text)
        self.assertIn('rdt_virt_instance_policy{%s"cache_l3"} 3328.0'
                      % labels, text)
        self.assertIn('rdt_virt_instance_policy_requested{%s"mem_bw"} 15.0'
                      % labels, text)
        self.assertNotIn('policy_requested{%s"cache_l3"' % labels, text)
        self.assertNotIn('setting="mem_bw_requested"', text)

    def test_host_and_agent_metrics(self):
        text = self.text(totals={'ticks': 3, 'writes': 12, 'errors': 0,
                                 'events': 1, 'tick_cpu': 0.004})
        for line in ('rdt_virt_host_rmids 176.0',
                     'rdt_virt_host_rmids_used 4.0',
                     'rdt_virt_host_monitoring_coverage_ratio 0.5',
                     'rdt_virt_host_monitoring_rotating 1.0',
                     'rdt_virt_agent_writes_total 12.0',
                     'rdt_virt_agent_tick_cpu_seconds 0.004'):
            self.assertIn(line, text)

    def test_monitoring_budget_and_features(self):
        self.doc['host'].update(instances=12, monitored=10, mon_budget=4,
                                mon_coverage=0.4, mba=False)
        text = self.text()
        for line in ('rdt_virt_host_instances 12.0',
                     'rdt_virt_host_monitored_instances 10.0',
                     'rdt_virt_host_monitoring_budget 4.0',
                     'rdt_virt_host_monitoring_group_coverage_ratio 0.4',
                     'rdt_virt_host_mba_supported 0.0'):
            self.assertIn(line, text)
        self.doc['host']['mba'] = True
        self.assertIn('rdt_virt_host_mba_supported 1.0', self.text())
        # Unknown while resctrl is not mounted: no sample.
        del self.doc['host']['mba']
        self.assertNotIn('rdt_virt_host_mba_supported', self.text())

    def test_when_the_agent_last_sampled(self):
        self.doc.update(time=1763800000.5, interval=10.0)
        text = self.text()
        self.assertEqual(1763800000.5, self.value(
            text, 'rdt_virt_agent_last_sample_timestamp_seconds'))
        self.assertEqual(10.0, self.value(
            text, 'rdt_virt_agent_sample_interval_seconds'))
        # Nothing sampled yet: no time to tell.
        self.assertNotIn('last_sample', self.text(doc={}))

    def test_refused_writes_by_error(self):
        text = self.text(totals={'ticks': 3, 'write_failures': {
            'refused': 2, 'busy': 0, 'nospace': 1}})
        self.assertIn('# TYPE rdt_virt_agent_write_failures_total counter',
                      text)
        for error, count in (('refused', 2.0), ('busy', 0.0),
                             ('nospace', 1.0)):
            self.assertEqual(count, self.value(
                text, 'rdt_virt_agent_write_failures_total', error=error))
        self.assertNotIn('write_failures', self.text(totals={'ticks': 3}))

    def test_ceiling_and_counter_assignment(self):
        self.doc['host'].update(bandwidth_ceiling_bps=4.0e11,
                                counter_resets=2, mbm_counters_total=32,
                                mbm_counters_available=0,
                                counter_coverage=0.4)
        text = self.text()
        self.assertEqual(4.0e11, self.value(
            text, 'rdt_virt_host_memory_bandwidth_ceiling_bytes_per_second'))
        for line in (
                'rdt_virt_host_mbm_counter_resets 2.0',
                'rdt_virt_host_mbm_counters 32.0',
                'rdt_virt_host_mbm_counters_available 0.0',
                'rdt_virt_host_mbm_counter_coverage_ratio 0.4'):
            self.assertIn(line, text)

    def test_core_energy_on_telemetry_hosts(self):
        self.assertNotIn('cpu_core', self.text())
        self.doc['instances'][UUID1].update(
            power_watts=3.5, energy_joules=120.25, activity_fps=5.469)
        self.doc['instances'][UUID2].update(
            power_watts=None, energy_joules=None, activity_fps=None)
        self.doc['host']['power_watts'] = 3.5
        text = self.text(names=False)
        labels = ('{group="rdtvirt-mb10",instance_uuid="%s",project="%s"}'
                  % (UUID1, PROJECT))
        for line in ('rdt_virt_instance_cpu_core_watts%s 3.5' % labels,
                     'rdt_virt_instance_cpu_core_joules_total%s 120.25'
                     % labels,
                     '# TYPE rdt_virt_instance_cpu_core_joules_total '
                     'counter',
                     'rdt_virt_instance_cpu_core_activity_farads_per_'
                     'second%s 5.469' % labels,
                     'rdt_virt_host_cpu_core_watts 3.5'):
            self.assertIn(line, text)
        # No value, no sample.
        self.assertNotIn('rdt_virt_instance_cpu_core_watts{group="",'
                         'instance_uuid="%s"' % UUID2, text)

    def test_protection_class_level_and_domains(self):
        self.doc['instances'][UUID1].update(priority='low', level=30)
        self.doc['instances'][UUID2].update(priority='high', level=None)
        self.doc['host']['controller'] = {
            'unit': 'percent', 'high_watermark': 0.85, 'domains': {
                '0': {'pressure': 0.91, 'capacity_bps': 1.2e10,
                      'capacity_source': 'learned', 'throttled': 1,
                      'active_high': 1, 'active_low': 2,
                      'low_at_floor': 1, 'starved_high': 0},
                '1': {'pressure': None, 'capacity_bps': None,
                      'throttled': 0, 'active_high': 0},
                '2': 'garbage'}}
        text = self.text(names=False)
        for line in (
                'rdt_virt_instance_protection_class{class="low",group='
                '"rdtvirt-mb10",instance_uuid="%s",project="%s"} 1.0'
                % (UUID1, PROJECT),
                'rdt_virt_instance_protection_class{class="high",group='
                '"",instance_uuid="%s",project=""} 1.0' % UUID2,
                'rdt_virt_instance_controller_level{group="rdtvirt-mb10",'
                'instance_uuid="%s",project="%s",unit="percent"} 30.0'
                % (UUID1, PROJECT),
                'rdt_virt_instance_controller_throttled{group='
                '"rdtvirt-mb10",instance_uuid="%s",project="%s"} 1.0'
                % (UUID1, PROJECT),
                'rdt_virt_domain_bandwidth_pressure_ratio{domain="0"} 0.91',
                'rdt_virt_domain_throttled_instances{domain="0"} 1.0',
                'rdt_virt_domain_throttled_instances{domain="1"} 0.0',
                'rdt_virt_domain_active_high_instances{domain="0"} 1.0',
                'rdt_virt_domain_active_low_instances{domain="0"} 2.0',
                'rdt_virt_domain_low_instances_at_floor{domain="0"} 1.0',
                'rdt_virt_domain_starved_high_instances{domain="0"} 0.0',
                'rdt_virt_host_controller_high_watermark_ratio 0.85'):
            self.assertIn(line, text)
        self.assertEqual(1.2e10, self.value(
            text, 'rdt_virt_domain_memory_bandwidth_capacity_bytes_per_second',
            domain='0', source='learned'))
        # No level: no sample; no pressure: no sample.
        self.assertNotIn('controller_level{group="",instance_uuid="%s"'
                         % UUID2, text)
        self.assertNotIn('pressure_ratio{domain="1"}', text)
        # A document from before the counts: no sample of them.
        self.assertNotIn('low_instances_at_floor{domain="1"}', text)
        self.assertNotIn('throttled{group="",instance_uuid="%s"' % UUID2,
                         text)

    def full_document(self):
        """Every per-instance family has a sample of both instances."""
        self.doc['instances'][UUID1].update(
            policy={'mem_bw': 20, 'mem_bw_requested': 15},
            power_watts=3.5, energy_joules=120.25, activity_fps=5.469,
            priority='low', level=30)
        self.doc['instances'][UUID2].update(
            mbm_total_bps=1e6, mbm_local_bps=1e6, llc_occupancy_bytes=1024,
            policy={'cache_l3': 3328, 'cache_l3_requested': 2048},
            power_watts=1.0, energy_joules=2.0, activity_fps=3.0,
            priority='low', level=10)
        self.doc['host'].update(power_watts=4.5, controller={
            'unit': 'percent', 'domains': {'0': {
                'pressure': 0.5, 'capacity_bps': 1e10,
                'capacity_source': 'learned', 'throttled': 2,
                'active_high': 0}}})
        return self.doc

    @staticmethod
    def families(text):
        from prometheus_client import parser
        return {f.name: f for f in
                parser.text_string_to_metric_families(text)}

    #: Every per-instance family of the endpoint.
    INSTANCE_FAMILIES = {
        'rdt_virt_instance_memory_bandwidth_total_bytes_per_second',
        'rdt_virt_instance_memory_bandwidth_local_bytes_per_second',
        'rdt_virt_instance_llc_occupancy_bytes',
        'rdt_virt_instance_monitored', 'rdt_virt_instance_policy',
        'rdt_virt_instance_policy_requested',
        'rdt_virt_instance_cpu_core_watts',
        'rdt_virt_instance_cpu_core_joules',
        'rdt_virt_instance_cpu_core_activity_farads_per_second',
        'rdt_virt_instance_protection_class',
        'rdt_virt_instance_controller_level',
        'rdt_virt_instance_controller_throttled'}

    def test_project_on_every_instance_family(self):
        for names in (False, True):
            found = self.families(self.text(doc=self.full_document(),
                                            names=names))
            instance = {n for n in found if n.startswith(
                'rdt_virt_instance_')}
            self.assertEqual(self.INSTANCE_FAMILIES, instance)
            for name in instance:
                projects = {s.labels['instance_uuid']: s.labels['project']
                            for s in found[name].samples}
                # Empty where the domain names no project.
                self.assertEqual({UUID1: PROJECT, UUID2: ''}, projects,
                                 name)

    def test_no_project_on_host_domain_and_agent_families(self):
        found = self.families(self.text(
            doc=self.full_document(),
            totals={'ticks': 3, 'writes': 12, 'errors': 0, 'events': 1,
                    'tick_cpu': 0.004}))
        host = {n for n in found if not n.startswith('rdt_virt_instance_')}
        for prefix in ('rdt_virt_host_', 'rdt_virt_domain_',
                       'rdt_virt_agent_'):
            self.assertTrue(any(n.startswith(prefix) for n in host), prefix)
        for name in host:
            for sample in found[name].samples:
                self.assertNotIn('project', sample.labels, name)
                self.assertNotIn(UUID1, sample.labels.values(), name)

    def test_project_label_name_is_configurable(self):
        from prometheus_client import exposition
        for names in (False, True):
            registry = self.prometheus.registry_for(
                lambda: self.doc, instance_names=names,
                project_label='tenant_id')
            text = exposition.generate_latest(registry).decode()
            self.assertNotIn('project=', text)
            self.assertEqual(1.5e8, self.value(
                text,
                'rdt_virt_instance_memory_bandwidth_total_bytes_per_second',
                group='rdtvirt-mb10', instance_uuid=UUID1,
                tenant_id=PROJECT, **({'domain': 'instance-1'} if names
                                      else {})))

    def test_no_project_label_for_comparisons(self):
        from prometheus_client import exposition
        registry = self.prometheus.registry_for(lambda: self.doc,
                                                project_label=None)
        text = exposition.generate_latest(registry).decode()
        self.assertNotIn('project', text)
        self.assertIn('rdt_virt_instance_monitored{group="rdtvirt-mb10",'
                      'instance_uuid="%s"} 1.0' % UUID1, text)

    def test_a_label_of_the_endpoint_is_refused(self):
        from rdt_virt import exception
        for label in ('instance_uuid', 'domain', 'group', 'setting',
                      'class', 'unit'):
            self.assertRaises(exception.InvalidConfig,
                              self.prometheus.StateCollector,
                              lambda: self.doc, project_label=label)

    def test_no_document_yet(self):
        self.assertIn('rdt_virt_instance_monitored', self.text(doc={}))

    def test_loopback(self):
        for host in ('127.0.0.1', '127.0.0.2', '::1', 'localhost'):
            self.assertTrue(self.prometheus.is_loopback(host), host)
        for host in ('0.0.0.0', '::', '', '192.0.2.1', '10.0.0.1',
                     'no-such-host.invalid'):
            self.assertFalse(self.prometheus.is_loopback(host), host)

    def test_non_loopback_needs_tls(self):
        from rdt_virt import exception
        for host in ('0.0.0.0', '::', ''):
            self.assertRaises(exception.InvalidConfig, self.prometheus.serve,
                              host, 0, lambda: self.doc)
            self.assertRaises(exception.InvalidConfig, self.prometheus.serve,
                              host, 0, lambda: self.doc, certfile='/x')

    def test_agent_refuses_clear_text_beyond_loopback(self):
        from rdt_virt.cmd import agent as agent_cmd

        class Agent(object):
            last_doc = self.doc
            totals = {}
        self.flags(prometheus_host='0.0.0.0', prometheus_port=1,
                   group='rdt_agent')
        self.assertIsNone(agent_cmd.start_prometheus(Agent()))

    def test_agent_serves_the_configured_project_label(self):
        from rdt_virt.cmd import agent as agent_cmd

        class Agent(object):
            last_doc = self.doc
            totals = {}
            last_tick = None
        self.flags(prometheus_host='127.0.0.1', prometheus_port=1,
                   prometheus_project_label='tenant', group='rdt_agent')
        served = {}

        def serve(*args, **kwargs):
            served.update(kwargs)
            return 'server'
        self.useFixture(base.fixtures.MonkeyPatch(
            'rdt_virt.telemetry.prometheus.serve', serve))
        self.assertEqual('server', agent_cmd.start_prometheus(Agent()))
        self.assertEqual('tenant', served['project_label'])

    def tls_files(self):
        tmp = self.useFixture(base.fixtures.TempDir()).path
        cert, key = os.path.join(tmp, 'c.pem'), os.path.join(tmp, 'k.pem')
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                        '-nodes', '-days', '1', '-subj', '/CN=localhost',
                        '-addext', 'subjectAltName=IP:127.0.0.1',
                        '-keyout', key, '-out', cert], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return cert, key

    def test_all_interfaces_over_tls(self):
        if not shutil.which('openssl'):
            self.skipTest('needs openssl')
        cert, key = self.tls_files()
        server = self.prometheus.serve('0.0.0.0', 0, lambda: self.doc,
                                       certfile=cert, keyfile=key)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        port = server.server_address[1]
        ctx = ssl.create_default_context(cafile=cert)
        with urllib.request.urlopen('https://127.0.0.1:%d/metrics' % port,
                                    timeout=5, context=ctx) as reply:
            self.assertIn(UUID1, reply.read().decode())
        # Clear text gets nothing.
        self.assertRaises((OSError, http.client.HTTPException),
                          urllib.request.urlopen,
                          'http://127.0.0.1:%d/metrics' % port, timeout=5)

    def test_client_certificate_required_with_client_ca(self):
        if not shutil.which('openssl'):
            self.skipTest('needs openssl')
        cert, key = self.tls_files()
        server = self.prometheus.serve('0.0.0.0', 0, lambda: self.doc,
                                       certfile=cert, keyfile=key,
                                       client_cafile=cert)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = 'https://127.0.0.1:%d/metrics' % server.server_address[1]
        anonymous = ssl.create_default_context(cafile=cert)
        self.assertRaises((OSError, http.client.HTTPException),
                          urllib.request.urlopen, url, timeout=5,
                          context=anonymous)
        client = ssl.create_default_context(cafile=cert)
        client.load_cert_chain(cert, key)
        with urllib.request.urlopen(url, timeout=5, context=client) as reply:
            self.assertIn(UUID1, reply.read().decode())

    def test_http_endpoint_on_loopback(self):
        server = self.prometheus.serve('127.0.0.1', 0, lambda: self.doc)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        port = server.server_address[1]
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                    timeout=5) as reply:
            body = reply.read().decode()
        self.assertIn(UUID1, body)


class TestProjectLabelOption(base.TestCase):
    """``[rdt_agent] prometheus_project_label`` takes label names only."""

    def conf(self, text):
        """rdt-virt's options loaded from a configuration file."""
        from oslo_config import cfg

        from rdt_virt.conf import agent as agent_conf
        from rdt_virt.conf import rdt as rdt_conf
        conf = cfg.ConfigOpts()
        rdt_conf.register_opts(conf)
        agent_conf.register_opts(conf)
        path = os.path.join(self.useFixture(base.fixtures.TempDir()).path,
                            'rdt-virt.conf')
        with open(path, 'w') as f:
            f.write('[rdt_agent]\n' + text)
        conf(['--config-file', path], project='rdt-virt')
        return conf

    def load(self, value):
        """The option's value as a file sets it."""
        return self.conf('prometheus_project_label = %s\n' % value
                         ).rdt_agent.prometheus_project_label

    def test_default_is_aetos_default(self):
        self.assertEqual('project',
                         self.conf('').rdt_agent.prometheus_project_label)

    def test_label_names(self):
        for value in ('project', 'tenant', 'project_id', '_p', 'P9'):
            self.assertEqual(value, self.load(value))

    def test_other_values_refused(self):
        from oslo_config import cfg
        for value in ('project-id', '9project', '__project', 'pro ject',
                      'projet.id', 'projé', 'instance_uuid', 'domain',
                      'group', 'setting', 'class', 'unit', 'instance',
                      'job'):
            self.assertRaises(cfg.ConfigFileValueError, self.load, value)

    def test_taken_labels_cover_the_endpoint(self):
        try:
            from rdt_virt.telemetry import prometheus
        except ImportError:
            self.skipTest('prometheus-client is not installed')
        from rdt_virt.conf import agent as agent_conf
        used = set(prometheus.NAME_LABELS) | set(prometheus.EXTRA_LABELS)
        self.assertLessEqual(used, set(agent_conf.TAKEN_LABELS))

    def test_agent_serves_no_metrics_with_a_bad_name(self):
        from rdt_virt.cmd import agent as agent_cmd
        logger = self.useFixture(base.fixtures.FakeLogger(level=40))
        conf = self.conf('prometheus_port = 1\n'
                         'prometheus_project_label = project-id\n')

        class Agent(object):
            last_doc = {}
            totals = {}
        self.assertIsNone(agent_cmd.start_prometheus(Agent(), conf=conf))
        self.assertIn('Not serving Prometheus metrics', logger.output)
        self.assertIn('project-id', logger.output)
