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

"""Flavor extra spec validation through the real compute API."""

from nova.tests.functional.api import client

from tests.functional.nova import base

INVALID = [
    ('hw:mem_bw', '0', 'an integer from 1 to 100'),
    ('hw:mem_bw', '101', 'an integer from 1 to 100'),
    ('hw:mem_bw', 'ten', 'an integer from 1 to 100'),
    ('hw:mem_bw', '50%', 'an integer from 1 to 100'),
    ('hw:mem_bw_mbps', '0', 'an integer from 1 to 4294967294'),
    ('hw:mem_bw_mbps', '4294967295', 'an integer from 1 to 4294967294'),
    ('hw:cache_l3', '-4096', 'an integer from 1 to 1073741824'),
    ('hw:cache_l3', '4MiB', 'an integer from 1 to 1073741824'),
    ('hw:cache_l3_code', '0', 'an integer from 1 to 1073741824'),
    ('hw:cache_l3_data', '1.5', 'an integer from 1 to 1073741824'),
    ('hw:rdt_monitor', 'sometimes', 'a boolean'),
    ('hw:rdt_priority', 'urgent', 'one of high, normal, low'),
    ('hw:rdt_priority', 'best-effort', 'one of high, normal, low'),
    ('hw:rdt_priority', '2', 'one of high, normal, low'),
]

VALID = [
    ('hw:mem_bw', '10'),
    ('hw:mem_bw', '1'),
    ('hw:mem_bw', '100'),
    ('hw:mem_bw_mbps', '2000'),
    ('hw:cache_l3', '4096'),
    ('hw:cache_l3_code', '2048'),
    ('hw:cache_l3_data', '6144'),
    ('hw:rdt_monitor', 'true'),
    ('hw:rdt_monitor', 'False'),
    ('hw:rdt_priority', 'high'),
    ('hw:rdt_priority', 'normal'),
    ('hw:rdt_priority', 'low'),
]


class TestExtraSpecValidation(base.RDTServersTestBase):
    """No compute is needed: validation happens in nova-api."""

    def setUp(self):
        super().setUp()
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=512, disk=1,
                                             ephemeral=0)

    def post(self, key, value, microversion):
        self.admin_api.microversion = microversion
        return self.admin_api.post_extra_spec(
            self.flavor_id, {'extra_specs': {key: value}})

    def test_invalid_values_get_400_with_the_reason(self):
        for microversion in ('2.86', 'latest'):
            for key, value, allowed in INVALID:
                e = self.assertRaises(client.OpenStackApiException,
                                      self.post, key, value, microversion)
                self.assertEqual(400, e.response.status_code,
                                 (key, value, microversion))
                text = e.response.text
                self.assertIn(
                    "'%s' is not a valid value for %s" % (value, key), text)
                self.assertIn(allowed, text)

    def test_valid_values_are_accepted(self):
        for microversion in ('2.86', 'latest'):
            for key, value in VALID:
                response = self.post(key, value, microversion)
                self.assertEqual(200, response.status, (key, value))
        specs = self.admin_api.get_extra_specs(self.flavor_id)
        self.assertEqual('False', specs['hw:rdt_monitor'])

    def test_unknown_rdt_like_keys_are_still_refused(self):
        # Nova knows the hw: namespace; a typo is not silently stored.
        e = self.assertRaises(client.OpenStackApiException, self.post,
                              'hw:mem_bandwidth', '10', 'latest')
        self.assertEqual(400, e.response.status_code)
        self.assertIn('does not appear to be a valid extra spec',
                      e.response.text)

    def test_no_validation_before_2_86(self):
        # Nova's rule, not ours: older microversions store anything.
        response = self.post('hw:mem_bw', '500', '2.85')
        self.assertEqual(200, response.status)
