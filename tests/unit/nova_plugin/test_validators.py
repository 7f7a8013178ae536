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

import os
import re
import types
from unittest import mock

from nova.api.validation.extra_specs import base as nova_base
from nova.api.validation.extra_specs import validators as nova_validators
from nova import exception as nova_exception

from nova_plugin.api import validators
from rdt_virt.policy import extra_specs
from tests import base


class TestValidators(base.TestCase):

    def setUp(self):
        super().setUp()
        self.by_name = {v.name: v for v in validators.register()}

    def test_one_validator_per_extra_spec(self):
        self.assertEqual(sorted(spec.key for spec in extra_specs.EXTRA_SPECS),
                         sorted(self.by_name))

    def test_documented_rdt_monitor_values_are_what_the_api_accepts(self):
        # admin/extra-specs.rst lists the values; the API must take each of
        # them with its meaning, and no other.
        path = os.path.join(os.path.dirname(base.FIXTURES_DIR), os.pardir,
                            'doc', 'source', 'admin', 'extra-specs.rst')
        with open(path) as f:
            text = ' '.join(f.read().split())
        match = re.search(r'for true (.*?); for false (.*?)\. ', text)
        self.assertIsNotNone(match, 'no list of hw:rdt_monitor values')
        documented = [re.findall(r'``([^`]+)``', part)
                      for part in match.groups()]
        validator = self.by_name['hw:rdt_monitor']
        spec = extra_specs.BY_KEY['hw:rdt_monitor']
        accepted = set()
        for meaning, values in zip((True, False), documented):
            for value in values:
                for variant in (value, value.upper(), ' %s ' % value):
                    validator.validate('hw:rdt_monitor', variant)
                    self.assertIs(meaning, spec.parse(variant), variant)
                accepted.add(value)
        # Every value the parser takes is documented.
        for value in ('true', 't', 'yes', 'y', 'on', '1', 'false', 'f',
                      'no', 'n', 'off', '0', 'enabled', 'yep', '2', ''):
            try:
                spec.parse(value)
            except Exception:
                self.assertNotIn(value, accepted)
                self.assertRaises(nova_exception.ValidationError,
                                  validator.validate, 'hw:rdt_monitor',
                                  value)
            else:
                self.assertIn(value, accepted)

    def test_valid_values(self):
        for name, value in [('hw:mem_bw', '10'), ('hw:mem_bw', '100'),
                            ('hw:mem_bw', '1'), ('hw:mem_bw_mbps', '5000'),
                            ('hw:cache_l3', '4096'),
                            ('hw:cache_l3_code', '1024'),
                            ('hw:cache_l3_data', '2048'),
                            ('hw:rdt_monitor', 'true'),
                            ('hw:rdt_monitor', 'no'),
                            ('hw:rdt_priority', 'high'),
                            ('hw:rdt_priority', 'normal'),
                            ('hw:rdt_priority', 'low')]:
            self.by_name[name].validate(name, value)

    def test_blanks_around_every_value(self):
        # admin/extra-specs: every key tolerates surrounding blanks, and
        # the value means what it means without them.
        valid = {'hw:mem_bw': '10', 'hw:mem_bw_mbps': '5000',
                 'hw:cache_l3': '4096', 'hw:cache_l3_code': '1024',
                 'hw:cache_l3_data': '2048', 'hw:rdt_monitor': 'true',
                 'hw:rdt_priority': 'low'}
        self.assertEqual(sorted(self.by_name), sorted(valid))
        for name, value in valid.items():
            spec = extra_specs.BY_KEY[name]
            for variant in (' %s' % value, '%s ' % value,
                            '\t%s\n' % value):
                self.by_name[name].validate(name, variant)
                self.assertEqual(spec.parse(value), spec.parse(variant),
                                 '%s=%r' % (name, variant))

    def test_invalid_values_say_why(self):
        cases = [('hw:mem_bw', '0', 'an integer from 1 to 100'),
                 ('hw:mem_bw', '101', 'an integer from 1 to 100'),
                 ('hw:mem_bw', 'ten', 'an integer from 1 to 100'),
                 ('hw:mem_bw', '10.5', 'an integer from 1 to 100'),
                 ('hw:mem_bw_mbps', '-1', 'an integer from 1 to'),
                 ('hw:cache_l3', '0', 'an integer from 1 to'),
                 ('hw:cache_l3_code', '4MiB', 'an integer from 1 to'),
                 ('hw:rdt_monitor', 'maybe', 'a boolean'),
                 ('hw:rdt_priority', 'urgent', 'one of high, normal, low'),
                 ('hw:rdt_priority', '', 'one of high, normal, low'),
                 ('hw:rdt_priority', '1', 'one of high, normal, low')]
        for name, value, allowed in cases:
            e = self.assertRaises(nova_exception.ValidationError,
                                  self.by_name[name].validate, name, value)
            self.assertIn("'%s' is not a valid value for %s" % (value, name),
                          str(e))
            self.assertIn(allowed, str(e))

    def test_enumeration_is_described_for_nova(self):
        # Nova's API reference renders the words of an enumeration.
        value = self.by_name['hw:rdt_priority'].value
        self.assertEqual(str, value['type'])
        self.assertEqual(['high', 'normal', 'low'], value['enum'])

    def test_wrong_name(self):
        self.assertRaises(nova_exception.ValidationError,
                          self.by_name['hw:mem_bw'].validate,
                          'hw:mem_bw_mbps', '10')

    def test_nova_loads_them_through_the_entry_point(self):
        # Nova loads validators when the module is imported; the project
        # must be installed (pip install -e) for its entry point to exist.
        nova_validators.validate('hw:mem_bw', '10')
        self.assertRaises(nova_exception.ValidationError,
                          nova_validators.validate, 'hw:mem_bw', '0')
        # Nova's own hw: validators are still there.
        nova_validators.validate('hw:cpu_policy', 'dedicated')
        self.assertRaises(nova_exception.ValidationError,
                          nova_validators.validate, 'hw:mem_bandwidth', '1')

    def test_no_clash_with_the_installed_nova(self):
        # The real entry points: Nova's own plugins (hw, resources, ...).
        plugins = validators._other_plugins()
        self.assertIn('hw', plugins)
        self.assertNotIn('rdt_virt', plugins)
        self.assertEqual([], validators.clashes(
            validators.register(), plugins))


class TestClashes(base.TestCase):

    def plugin(self, *validators_):
        return types.SimpleNamespace(register=lambda: list(validators_))

    def test_upstream_validator_of_the_same_name_fails_the_load(self):
        upstream = nova_base.ExtraSpecValidator(
            name='hw:mem_bw', description='upstream',
            value={'type': int, 'min': 0})
        with mock.patch.object(validators, '_other_plugins', return_value={
                'hw': self.plugin(upstream)}):
            e = self.assertRaises(validators.ValidatorConflict,
                                  validators.register)
        self.assertEqual([('hw:mem_bw', 'hw', 'hw:mem_bw')], e.clashes)
        self.assertIn('hw:mem_bw is also validated by hw', str(e))

    def test_parametrised_name_that_covers_ours(self):
        upstream = nova_base.ExtraSpecValidator(
            name='hw:cache_{level}', description='upstream',
            value={'type': int},
            parameters=[{'name': 'level', 'pattern': r'l\d', 'description':
                         'level'}])
        other = nova_base.ExtraSpecValidator(
            name='hw:numa_nodes', description='other', value={'type': int})
        found = validators.clashes(validators.register(),
                                   {'hw': self.plugin(upstream, other)})
        self.assertEqual([('hw:cache_l3', 'hw', 'hw:cache_{level}')], found)
