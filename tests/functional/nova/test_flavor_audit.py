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

"""``rdt-virt flavor-audit`` against Nova's API.

openstacksdk talks to the harness's nova-api through its wsgi-intercept
URL, without Keystone: the harness trusts the user, project and role
headers, which the session sends with every request.
"""

import io
import shlex
from unittest import mock

from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
import openstack

from rdt_virt.cmd import cli
from tests.functional.nova import base


class FlavorAuditTest(base.RDTServersTestBase):

    def connect(self, cloud=None):
        self.assertIsNone(cloud)
        url = self.api_fixture.admin_api.base_url
        sess = ks_session.Session(
            auth=noauth.NoAuth(endpoint=url),
            additional_headers={
                'X-Auth-User': 'admin', 'X-User-Id': 'admin',
                'X-Auth-Project-Id': self.api_fixture.project_id,
                'X-Roles': 'reader,member,admin'})
        return openstack.connection.Connection(
            session=sess, compute_endpoint_override=url,
            compute_api_version='2.61')

    def audit(self):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stderr', err):
            rc = cli.main(['flavor-audit'], out=out, connect=self.connect)
        return rc, out.getvalue(), err.getvalue()

    def make(self, name, specs, is_public=True):
        flavor = self.admin_api.post_flavor({'flavor': {
            'name': name, 'ram': 512, 'vcpus': 1, 'disk': 1,
            'os-flavor-access:is_public': is_public}})
        if specs:
            self.admin_api.post_extra_spec(flavor['id'],
                                           {'extra_specs': specs})
        return flavor['id']

    def specs(self, flavor_id):
        return self.admin_api.get_flavor(flavor_id).get('extra_specs', {})

    def test_audit_and_apply_the_fixes(self):
        good = self.make('good', {'hw:mem_bw': '10',
                                  'resources:CUSTOM_RDT_CLOSID': '1',
                                  'trait:CUSTOM_RDT_MBA': 'required'})
        self.make('plain', {'hw:cpu_policy': 'shared'})
        self.make('monitor-only', {'hw:rdt_monitor': 'true'})
        batch = self.make('m1 batch', {'hw:mem_bw': '10'})
        cache = self.make('cache', {'hw:cache_l3': '4096',
                                    'hw:mem_bw': '20'}, is_public=False)
        stray = self.make('stray', {'resources:CUSTOM_RDT_CLOSID': '1'})
        # Its CLOSID from Placement, but not the trait.
        notrait = self.make('no trait', {'hw:mem_bw': '10',
                                         'resources:CUSTOM_RDT_CLOSID': '1'})
        rc, out, err = self.audit()
        self.assertEqual(1, rc, err)
        self.assertEqual('4 flavor(s) to change\n', err)
        self.assertEqual(
            '# cache (id %(cache)s): filter-only, lacks '
            'resources:CUSTOM_RDT_CLOSID=1, '
            'trait:CUSTOM_RDT_L3_CAT=required, '
            'trait:CUSTOM_RDT_MBA=required\n'
            'openstack flavor set --property resources:CUSTOM_RDT_CLOSID=1 '
            '--property trait:CUSTOM_RDT_L3_CAT=required '
            '--property trait:CUSTOM_RDT_MBA=required %(cache)s\n'
            '# m1 batch (id %(batch)s): filter-only, lacks '
            'resources:CUSTOM_RDT_CLOSID=1, trait:CUSTOM_RDT_MBA=required\n'
            'openstack flavor set --property resources:CUSTOM_RDT_CLOSID=1 '
            '--property trait:CUSTOM_RDT_MBA=required %(batch)s\n'
            '# no trait (id %(notrait)s): Placement mode, lacks '
            'trait:CUSTOM_RDT_MBA=required\n'
            'openstack flavor set --property trait:CUSTOM_RDT_MBA=required '
            '%(notrait)s\n'
            '# stray (id %(stray)s): conflicting keys, refused by compute '
            'hosts: requests 1 CUSTOM_RDT_CLOSID, no hw: key uses one\n'
            'openstack flavor unset --property resources:CUSTOM_RDT_CLOSID '
            '%(stray)s\n' % {'cache': cache, 'batch': batch,
                             'stray': stray, 'notrait': notrait}, out)

        # Apply the printed commands as the openstack client does them,
        # through openstacksdk, and audit again: nothing left.
        conn = self.connect()
        for line in out.splitlines():
            if line.startswith('#'):
                continue
            words = shlex.split(line)
            self.assertEqual(['openstack', 'flavor'], words[:2])
            flavor_id = words[-1]
            props = [w for w in words[3:-1] if w != '--property']
            if words[2] == 'set':
                conn.compute.create_flavor_extra_specs(
                    flavor_id, dict(p.split('=', 1) for p in props))
            else:
                self.assertEqual('unset', words[2])
                for key in props:
                    conn.compute.delete_flavor_extra_specs_property(
                        flavor_id, key)
        self.assertEqual({'hw:mem_bw': '10',
                          'resources:CUSTOM_RDT_CLOSID': '1',
                          'trait:CUSTOM_RDT_MBA': 'required'},
                         self.specs(batch))
        self.assertEqual({}, self.specs(stray))
        self.assertEqual((0, '', '0 flavor(s) to change\n'), self.audit())
        self.assertIn('resources:CUSTOM_RDT_CLOSID', self.specs(good))

    def test_priority_classes(self):
        self.make('normal', {'hw:rdt_priority': 'normal'})
        self.make('gold', {'hw:rdt_priority': 'high',
                           'trait:CUSTOM_RDT_MBA': 'required'})
        bare = self.make('bare gold', {'hw:rdt_priority': 'high'})
        # A low flavor needs no trait: it runs on hosts without MBA too.
        self.make('batch', {'hw:rdt_priority': 'low'})
        # What earlier releases asked for: it works, and may go.
        old = self.make('old batch', {'hw:rdt_priority': 'low',
                                      'trait:CUSTOM_RDT_MBA': 'required'})
        # Each key is valid alone, so the API stores them; together they
        # are refused everywhere.
        cached = self.make('cached', {'hw:rdt_priority': 'low',
                                      'hw:cache_l3': '4096'})
        rc, out, err = self.audit()
        self.assertEqual(1, rc, err)
        self.assertEqual('2 flavor(s) to change\n'
                         '1 flavor(s) with keys they no longer need '
                         '(commented out above)\n', err)
        self.assertEqual(
            '# bare gold (id %(bare)s): filter-only, lacks '
            'trait:CUSTOM_RDT_MBA=required\n'
            'openstack flavor set --property trait:CUSTOM_RDT_MBA=required '
            '%(bare)s\n'
            '# cached (id %(cached)s): invalid RDT extra specs, fix by '
            'hand: invalid value \'low\' for extra spec hw:rdt_priority: '
            'low cannot be combined with hw:cache_l3: the controller '
            'throttles low instances in rdt-virt\'s groups, and a '
            'dedicated cache puts the instance in libvirt\'s\n'
            '# old batch (id %(old)s): works, but no longer needs '
            'trait:CUSTOM_RDT_MBA: hw:rdt_priority=low runs on hosts '
            'without MBA too (no high instance runs there), and requiring '
            'CUSTOM_RDT_MBA only keeps it off them\n'
            '#   openstack flavor unset --property trait:CUSTOM_RDT_MBA '
            '%(old)s\n'
            % {'bare': bare, 'cached': cached, 'old': old}, out)

    def test_unneeded_keys_alone_change_nothing(self):
        old = self.make('old batch', {'hw:rdt_priority': 'low',
                                      'trait:CUSTOM_RDT_MBA': 'required'})
        rc, out, err = self.audit()
        self.assertEqual(0, rc, err)
        self.assertEqual('0 flavor(s) to change\n'
                         '1 flavor(s) with keys they no longer need '
                         '(commented out above)\n', err)
        # Run as a shell script, the output changes nothing.
        self.assertEqual([], [line for line in out.splitlines()
                              if not line.startswith('#')])
        self.assertEqual({'hw:rdt_priority': 'low',
                          'trait:CUSTOM_RDT_MBA': 'required'},
                         self.specs(old))

    def test_unreachable_cloud(self):
        def connect(cloud=None):
            raise openstack.exceptions.ConfigException('no cloud')
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            rc = cli.main(['flavor-audit', '--os-cloud', 'x'],
                          out=io.StringIO(), connect=connect)
        self.assertEqual(2, rc)
        self.assertIn('cannot list the flavors: no cloud', err.getvalue())
