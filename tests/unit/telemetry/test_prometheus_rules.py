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

"""The shipped Prometheus rules read only series the agent serves.

promtool (tox -e promtool) tests the rules on synthetic series; this test
keeps those names, and the labels the rules select on, in step with the
endpoint (:mod:`rdt_virt.telemetry.prometheus`), rendered for a document
that fills every field the endpoint reads.
"""

import glob
import os
import re

import yaml

from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
RULES = sorted(glob.glob(os.path.join(ROOT, 'etc', 'prometheus', '*.yml')))
TESTS = sorted(glob.glob(os.path.join(ROOT, 'tests', 'prometheus', '*.yml')))
# A series of the agent, with its label matchers if any.
SERIES = re.compile(r'\b(rdt_virt_[a-z0-9_]+)(?:\{([^}]*)\})?')
RECORDED = re.compile(r'\brdt_virt:[a-z0-9_]+:[a-z0-9_]+')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)')
UUID = '6b1c8a52-9d2e-4f3a-8c51-0a7e5d2b9f10'
# What Prometheus adds to every series of a target (fqdn: the scrape
# configuration's label the rules expect).
TARGET_LABELS = {'job', 'instance', 'fqdn'}


def rich_document(prometheus):
    """A state document with a value for every field the endpoint reads."""
    inst = {'name': 'instance-1', 'group': 'rdtvirt-mb10',
            'policy': {'mem_bw': 20, 'mem_bw_requested': 15},
            'priority': 'low', 'level': 30, 'reason': None}
    for field, _name, _text in prometheus._INSTANCE:
        inst[field] = 1.0
    for field, _name, _text, _counter in prometheus._ENERGY:
        inst[field] = 1.0
    host = {field: 1.0 for field, _name, _text in prometheus._HOST}
    domain = {field: 1.0 for field, _name, _text in prometheus._DOMAIN}
    domain['capacity_source'] = 'learned'
    host['controller'] = {'unit': 'percent', 'high_watermark': 0.85,
                          'domains': {'0': domain}}
    return {'time': 1763800000.5, 'interval': 10.0, 'host': host,
            'instances': {UUID: inst}}


def rules(path):
    with open(path) as f:
        return [rule for group in yaml.safe_load(f)['groups']
                for rule in group['rules']]


class TestRulesAndEndpoint(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            self.skipTest('prometheus-client is not installed')
        self.assertTrue(RULES, 'no rules in etc/prometheus')

    def served(self):
        """{series name: label names} of the endpoint's samples."""
        from prometheus_client import exposition
        from prometheus_client import parser

        from rdt_virt.agent import executor
        from rdt_virt.telemetry import prometheus

        totals = {'ticks': 1, 'writes': 1, 'errors': 0, 'events': 1,
                  'tick_cpu': 0.001,
                  'write_failures': dict.fromkeys(executor.COUNTED, 0)}
        served = {}
        for names in (False, True):
            doc = rich_document(prometheus)
            text = exposition.generate_latest(prometheus.registry_for(
                lambda: doc, lambda: totals,
                instance_names=names)).decode()
            for family in parser.text_string_to_metric_families(text):
                for sample in family.samples:
                    served.setdefault(sample.name, set()).update(
                        sample.labels)
        return served

    def check(self, text, served, where):
        for name, matchers in SERIES.findall(text):
            self.assertIn(name, served, '%s reads %s, which the agent '
                          'does not serve' % (where, name))
            for label in LABEL.findall(matchers or ''):
                self.assertIn(label, served[name] | TARGET_LABELS,
                              '%s selects %s on %s, a label it does not '
                              'have' % (where, name, label))

    def test_every_series_the_rules_read_is_served(self):
        served = self.served()
        recorded = set()
        for path in RULES:
            for rule in rules(path):
                if 'record' in rule:
                    recorded.add(rule['record'])
        read = set()
        for path in RULES:
            for rule in rules(path):
                where = '%s (%s)' % (rule.get('alert') or rule['record'],
                                     os.path.basename(path))
                self.check(rule['expr'], served, where)
                read |= set(n for n, _m in SERIES.findall(rule['expr']))
                for name in RECORDED.findall(rule['expr']):
                    self.assertIn(name, recorded, '%s reads %s, which no '
                                  'rule records' % (where, name))
        # The check checks something: the controller's and the agent's
        # series are among those read.
        self.assertIn('rdt_virt_domain_low_instances_at_floor', read)
        self.assertIn('rdt_virt_agent_last_sample_timestamp_seconds', read)

    def test_the_promtool_tests_feed_served_series(self):
        self.assertTrue(TESTS, 'no promtool tests in tests/prometheus')
        served = self.served()
        for path in TESTS:
            with open(path) as f:
                suite = yaml.safe_load(f)
            for test in suite['tests']:
                for series in test.get('input_series', ()):
                    self.check(series['series'], served, '%s: %s' % (
                        os.path.basename(path), test['name']))

    def test_every_alert_names_its_host_and_severity(self):
        for path in RULES:
            for rule in rules(path):
                if 'alert' not in rule:
                    continue
                self.assertIn(rule['labels'].get('severity'),
                              ('warning', 'critical'), rule['alert'])
                self.assertIn('for', rule, rule['alert'])
                self.assertIn('$labels.fqdn',
                              rule['annotations']['summary'], rule['alert'])
                self.assertTrue(rule['annotations'].get('description'),
                                rule['alert'])
