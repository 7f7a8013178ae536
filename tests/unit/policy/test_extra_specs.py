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

from rdt_virt import exception
from rdt_virt.policy import extra_specs as es
from tests import base


class TestFromExtraSpecs(base.TestCase):

    VALID = [
        ({}, es.RDTPolicy()),
        ({'hw:cpu_policy': 'dedicated'}, es.RDTPolicy()),
        ({'hw:mem_bw': '10'}, es.RDTPolicy(mem_bw=10)),
        ({'hw:mem_bw': '1'}, es.RDTPolicy(mem_bw=1)),
        ({'hw:mem_bw': '100'}, es.RDTPolicy(mem_bw=100)),
        ({'hw:mem_bw': ' 25 '}, es.RDTPolicy(mem_bw=25)),
        ({'hw:mem_bw_mbps': '2000'}, es.RDTPolicy(mem_bw_mbps=2000)),
        ({'hw:cache_l3': '4096'}, es.RDTPolicy(cache_l3=4096)),
        ({'hw:cache_l3_code': '1024', 'hw:cache_l3_data': '2048'},
         es.RDTPolicy(cache_l3_code=1024, cache_l3_data=2048)),
        ({'hw:rdt_monitor': 'false'}, es.RDTPolicy(monitor=False)),
        ({'hw:rdt_monitor': 'Yes'}, es.RDTPolicy(monitor=True)),
        ({'hw:mem_bw': '10', 'hw:cache_l3': '8192', 'hw:rdt_monitor': '1'},
         es.RDTPolicy(mem_bw=10, cache_l3=8192, monitor=True)),
    ]

    INVALID = [
        ({'hw:mem_bw': '0'}, 'hw:mem_bw', 'an integer from 1 to 100'),
        ({'hw:mem_bw': '101'}, 'hw:mem_bw', 'an integer from 1 to 100'),
        ({'hw:mem_bw': '10%'}, 'hw:mem_bw', 'an integer from 1 to 100'),
        ({'hw:mem_bw': '1.5'}, 'hw:mem_bw', 'an integer from 1 to 100'),
        ({'hw:mem_bw': ''}, 'hw:mem_bw', 'an integer from 1 to 100'),
        ({'hw:mem_bw_mbps': '0'}, 'hw:mem_bw_mbps', 'an integer from 1 to'),
        ({'hw:mem_bw_mbps': '4294967295'}, 'hw:mem_bw_mbps',
         'an integer from 1 to 4294967294'),
        ({'hw:cache_l3': '-4'}, 'hw:cache_l3', 'an integer from 1 to'),
        ({'hw:cache_l3': '4M'}, 'hw:cache_l3', 'an integer from 1 to'),
        ({'hw:rdt_monitor': 'maybe'}, 'hw:rdt_monitor', 'a boolean'),
        ({'hw:mem_bw': '10', 'hw:mem_bw_mbps': '100'}, 'hw:mem_bw_mbps',
         'cannot be combined with hw:mem_bw'),
        ({'hw:cache_l3': '10', 'hw:cache_l3_code': '10',
          'hw:cache_l3_data': '10'}, 'hw:cache_l3_code',
         'cannot be combined with hw:cache_l3'),
        ({'hw:cache_l3_code': '10'}, 'hw:cache_l3_code',
         'needs hw:cache_l3_data as well'),
        ({'hw:cache_l3_data': '10'}, 'hw:cache_l3_data',
         'needs hw:cache_l3_code as well'),
    ]

    def test_valid(self):
        for specs, expected in self.VALID:
            self.assertEqual(expected, es.from_extra_specs(specs), specs)

    def test_invalid_names_key_value_and_allowed(self):
        for specs, key, allowed in self.INVALID:
            exc = self.assertRaises(exception.InvalidExtraSpec,
                                    es.from_extra_specs, specs)
            self.assertEqual(key, exc.key, specs)
            self.assertEqual(specs[key], exc.value)
            self.assertIn(allowed, exc.allowed)
            self.assertIn(key, str(exc))
            self.assertIn(repr(specs[key]), str(exc))

    def test_empty_and_properties(self):
        self.assertTrue(es.from_extra_specs({'foo': 'bar'}).is_empty)
        policy = es.from_extra_specs({'hw:rdt_monitor': 'false'})
        self.assertFalse(policy.is_empty)
        self.assertFalse(policy.wants_mem_bw)
        self.assertFalse(policy.wants_cache)
        self.assertTrue(es.RDTPolicy(mem_bw_mbps=5).wants_mem_bw)
        self.assertTrue(es.RDTPolicy(cache_l3_data=5).wants_cache)

    def test_monitoring_default(self):
        self.assertTrue(es.RDTPolicy().monitoring(True))
        self.assertFalse(es.RDTPolicy().monitoring(False))
        self.assertFalse(es.RDTPolicy(monitor=False).monitoring(True))
        self.assertTrue(es.RDTPolicy(monitor=True).monitoring(False))

    def test_every_spec_is_documented(self):
        keys = [spec.key for spec in es.EXTRA_SPECS]
        self.assertEqual(len(keys), len(set(keys)))
        for spec in es.EXTRA_SPECS:
            self.assertTrue(spec.key.startswith('hw:'))
            self.assertGreater(len(spec.description), 40)


class TestPriority(base.TestCase):

    def test_values(self):
        for value, expected in [('high', es.PRIORITY_HIGH),
                                ('normal', es.PRIORITY_NORMAL),
                                ('low', es.PRIORITY_LOW),
                                (' Low ', es.PRIORITY_LOW),
                                ('HIGH', es.PRIORITY_HIGH)]:
            policy = es.from_extra_specs({'hw:rdt_priority': value})
            self.assertEqual(expected, policy.priority, value)

    def test_default_is_normal(self):
        self.assertEqual(es.PRIORITY_NORMAL, es.RDTPolicy().priority)
        self.assertEqual(es.PRIORITY_NORMAL,
                         es.from_extra_specs({'hw:mem_bw': '10'}).priority)

    def test_normal_alone_is_no_policy(self):
        # Every existing flavor is normal: saying so changes nothing.
        self.assertTrue(es.from_extra_specs(
            {'hw:rdt_priority': 'normal'}).is_empty)
        self.assertFalse(es.from_extra_specs(
            {'hw:rdt_priority': 'low'}).is_empty)

    def test_invalid_values(self):
        for value in ('', 'medium', 'hi', '1', 'true', 'high,low'):
            e = self.assertRaises(exception.InvalidExtraSpec,
                                  es.from_extra_specs,
                                  {'hw:rdt_priority': value})
            self.assertEqual('hw:rdt_priority', e.key)
            self.assertEqual('one of high, normal, low', e.allowed)

    def test_classes_are_monitored(self):
        for priority in ('high', 'low'):
            policy = es.from_extra_specs({'hw:rdt_priority': priority})
            self.assertTrue(policy.monitoring(False))
            e = self.assertRaises(exception.InvalidExtraSpec,
                                  es.from_extra_specs,
                                  {'hw:rdt_priority': priority,
                                   'hw:rdt_monitor': 'false'})
            self.assertIn('needs monitoring', e.allowed)
        self.assertFalse(es.from_extra_specs(
            {'hw:rdt_priority': 'normal',
             'hw:rdt_monitor': 'false'}).monitoring(True))

    def test_low_with_a_dedicated_cache_is_refused(self):
        for cache in ({'hw:cache_l3': '4096'},
                      {'hw:cache_l3_code': '1024',
                       'hw:cache_l3_data': '1024'}):
            e = self.assertRaises(exception.InvalidExtraSpec,
                                  es.from_extra_specs,
                                  dict(cache, **{'hw:rdt_priority': 'low'}))
            self.assertEqual('hw:rdt_priority', e.key)
            self.assertIn('low cannot be combined with hw:cache_l3',
                          e.allowed)
        # A high instance may hold a cache of its own.
        self.assertEqual(4096, es.from_extra_specs(
            {'hw:rdt_priority': 'high', 'hw:cache_l3': '4096'}).cache_l3)

    def test_definition_is_checked(self):
        self.assertRaises(ValueError, es.ExtraSpec, 'hw:x', str, 'x')
        self.assertRaises(ValueError, es.ExtraSpec, 'hw:x', int, 'x')
        self.assertRaises(ValueError, es.ExtraSpec, 'hw:x', float, 'x',
                          min=1)
