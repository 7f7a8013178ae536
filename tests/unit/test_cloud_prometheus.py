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

"""The test cloud's Prometheus and Aetos configuration, without a cloud."""

import configparser
import os
import shutil
import subprocess

import fixtures
import yaml

from rdt_virt.cloud import flow_prometheus
from rdt_virt.cloud import prometheus
from rdt_virt.cloud import services
from rdt_virt.telemetry import prometheus as exporter
from tests import base


def layout(tmp):
    ports = {name: 20000 + i for i, name in enumerate(services.PORTS)}
    return services.Layout(tmp, ports)


class TestScrapeConfig(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.layout = layout(self.tmp)

    def test_every_exporter_of_every_host_with_its_host_as_fqdn(self):
        got = prometheus.targets(self.layout)
        want = [(job, host, '127.0.0.1:%d' % self.layout.ports[
            '%s_%s' % (key, host)])
            for job, key in (('rdt-virt-agent', 'agent_prom'),
                             ('ceilometer', 'ceilometer_prom'))
            for host in ('compute1', 'compute2')]
        self.assertEqual(want, got)

    def test_config_one_job_per_exporter_kind(self):
        conf = prometheus.config(
            [('rdt-virt-agent', 'compute1', '127.0.0.1:1'),
             ('rdt-virt-agent', 'compute2', '127.0.0.1:2'),
             ('ceilometer', 'compute1', '127.0.0.1:3')],
            rule_files=['/x/etc/prometheus/*.yml'])
        self.assertEqual({
            'global': {'scrape_interval': '5s', 'scrape_timeout': '4s',
                       'evaluation_interval': '5s'},
            'rule_files': ['/x/etc/prometheus/*.yml'],
            'scrape_configs': [
                {'job_name': 'rdt-virt-agent', 'static_configs': [
                    {'targets': ['127.0.0.1:1'],
                     'labels': {'fqdn': 'compute1'}},
                    {'targets': ['127.0.0.1:2'],
                     'labels': {'fqdn': 'compute2'}}]},
                {'job_name': 'ceilometer', 'static_configs': [
                    {'targets': ['127.0.0.1:3'],
                     'labels': {'fqdn': 'compute1'}}]}],
        }, conf)

    def test_render_reads_back(self):
        conf = prometheus.config(prometheus.targets(self.layout),
                                 [prometheus.RULES])
        text = prometheus.render(conf)
        self.assertEqual(conf, yaml.safe_load(text))
        # In the order Prometheus's documentation writes it.
        self.assertLess(text.index('global:'), text.index('rule_files:'))
        self.assertLess(text.index('rule_files:'),
                        text.index('scrape_configs:'))

    def test_rules_are_the_source_trees(self):
        self.assertEqual(os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), 'etc',
            'prometheus', '*.yml'), prometheus.RULES)

    def test_rule_files_are_those_the_glob_finds(self):
        for name in ('b.yml', 'a.yml', 'notes.txt'):
            open(os.path.join(self.tmp, name), 'w').close()
        self.assertEqual([os.path.join(self.tmp, 'a.yml'),
                          os.path.join(self.tmp, 'b.yml')],
                         prometheus.rule_files(os.path.join(self.tmp,
                                                            '*.yml')))

    def test_rule_copies_differ_from_the_shipped_only_in_the_holds(self):
        written = prometheus.write_rules(self.layout)
        self.assertEqual(prometheus.loaded_rules(self.layout),
                         sorted(written))
        self.assertEqual([os.path.basename(p) for p in
                          prometheus.rule_files()],
                         [os.path.basename(p) for p in sorted(written)])
        held = []
        for path, changed in written.items():
            with open(os.path.join(os.path.dirname(prometheus.RULES),
                                   os.path.basename(path))) as f:
                shipped = yaml.safe_load(f)
            with open(path) as f:
                copy = yaml.safe_load(f)
            for group, group_copy in zip(shipped['groups'], copy['groups']):
                for rule, rule_copy in zip(group['rules'],
                                           group_copy['rules']):
                    if rule.get('alert') in prometheus.HOLDS:
                        held.append((rule['alert'], rule_copy['for'],
                                     rule['for']))
                        rule_copy['for'] = rule['for']
            self.assertEqual(shipped, copy)
            self.assertEqual(held, changed)
        # Production's hold is minutes; the flow's a minute.
        self.assertEqual([('RdtVirtAgentDown', '60s', '5m')], held)

    def test_written_config_passes_promtool(self):
        promtool = shutil.which('promtool')
        if not promtool:
            self.skipTest('promtool is not installed (Debian: prometheus)')
        path = prometheus.write_config(self.layout)
        self.assertEqual(self.layout.etc('prometheus', 'prometheus.yml'),
                         path)
        out = subprocess.run([promtool, 'check', 'config', path],
                             capture_output=True, text=True)
        self.assertEqual(0, out.returncode, out.stdout + out.stderr)
        # The rule files it names were found and checked too.
        rules = 0
        for rule_file in prometheus.loaded_rules(self.layout):
            with open(rule_file) as f:
                rules += sum(len(g['rules'])
                             for g in yaml.safe_load(f)['groups'])
        self.assertIn('SUCCESS: %d rules found' % rules,
                      out.stdout + out.stderr)

    def test_prometheus_listens_on_loopback_under_the_cloud(self):
        argv = prometheus.argv(self.layout, '/c/prometheus.yml')
        self.assertEqual(prometheus.PROMETHEUS, argv[0])
        self.assertIn('--web.listen-address=127.0.0.1:%d' %
                      self.layout.ports['prometheus'], argv)
        self.assertIn('--storage.tsdb.path=%s' % self.layout.path(
            'state', 'prometheus'), argv)
        self.assertIn('--config.file=/c/prometheus.yml', argv)


class TestAetos(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.layout = layout(self.tmp)

    def test_conf_points_at_prometheus_and_keystone(self):
        path, home = prometheus.aetos_conf(self.layout)
        conf = configparser.ConfigParser()
        conf.read(path)
        self.assertEqual('keystone', conf.get('DEFAULT', 'auth_mode'))
        self.assertEqual('127.0.0.1', conf.get('prometheus', 'host'))
        self.assertEqual(str(self.layout.ports['prometheus']),
                         conf.get('prometheus', 'port'))
        self.assertEqual('project',
                         conf.get('prometheus', 'project_label_name'))
        self.assertEqual('aetos', conf.get('keystone_authtoken', 'username'))
        self.assertEqual(self.layout.keystone_url,
                         conf.get('keystone_authtoken', 'auth_url'))
        # Aetos's WSGI module and its Keystone middleware read the
        # project's default file only: ~/.aetos/aetos.conf.
        self.assertEqual(os.path.realpath(path), os.path.realpath(
            os.path.join(home, '.aetos', 'aetos.conf')))
        # Again, as after a restart: the link is kept.
        self.assertEqual((path, home), prometheus.aetos_conf(self.layout))

    def test_registered_as_devstack_registers_it(self):
        user, name, kind, port, path = prometheus.CATALOG_ENTRY
        self.assertEqual(('aetos', 'aetos', 'metric-storage'),
                         (user, name, kind))
        self.assertIn(port, services.PORTS)

    def test_one_project_label_for_the_agent_ceilometer_and_aetos(self):
        # The agent's default, Ceilometer's exporter's fixed label and
        # Aetos's default project_label_name.
        self.assertEqual(exporter.PROJECT_LABEL, prometheus.PROJECT_LABEL)
        self.assertEqual('project', prometheus.PROJECT_LABEL)


class TestTenantRows(base.TestCase):

    def test_series_by_instance_with_their_projects(self):
        rows = [{'instance_uuid': 'u1', 'project': 'p1', 'value': '1'},
                {'instance_uuid': 'u1', 'project': 'p1', 'value': '2',
                 'setting': 'cache_l3'},
                {'instance_uuid': 'u2', 'project': 'p2', 'value': '3'}]
        self.assertEqual({'u1': {'p1'}, 'u2': {'p2'}},
                         flow_prometheus._series(rows))
        self.assertEqual({}, flow_prometheus._series([]))
        self.assertEqual({}, flow_prometheus._series(None))

    def test_rows_of_a_query_table(self):
        text = (
            '+----------+--------------------------------------+-------+\n'
            '| fqdn     | instance_uuid                        | value |\n'
            '+----------+--------------------------------------+-------+\n'
            '| compute2 | 01a46b5c-b670-4070-9d62-5f70593acb86 | 3328  |\n'
            '| compute1 | 4eb014b2-7c9a-4e3b-91c0-a9fcf7c49bee | 1     |\n'
            '+----------+--------------------------------------+-------+\n')
        self.assertEqual(
            [{'fqdn': 'compute2', 'value': '3328',
              'instance_uuid': '01a46b5c-b670-4070-9d62-5f70593acb86'},
             {'fqdn': 'compute1', 'value': '1',
              'instance_uuid': '4eb014b2-7c9a-4e3b-91c0-a9fcf7c49bee'}],
            flow_prometheus.table_rows(text))
        # No series: the command prints nothing.
        self.assertEqual([], flow_prometheus.table_rows(''))

    def test_field_of_a_show_table(self):
        text = ('+-------+----------------------------------+\n'
                '| Field | Value                            |\n'
                '+-------+----------------------------------+\n'
                '| id    | 20702da526944f7d9a848bd02af42d61 |\n'
                '| name  | tenant-a                         |\n'
                '+-------+----------------------------------+\n')
        self.assertEqual('20702da526944f7d9a848bd02af42d61',
                         flow_prometheus.field(text, 'id'))
        self.assertIsNone(flow_prometheus.field(text, 'status'))
