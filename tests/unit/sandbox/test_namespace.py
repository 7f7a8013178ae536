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

"""A sandbox's libvirtd on TCP, for live migrations between sandboxes."""

import re
import uuid

import fixtures

from rdt_virt.sandbox import launcher
from rdt_virt.sandbox import namespace
from tests import base


def _settings(text):
    return dict(re.findall(r'^(\w+) = (.*)$', text, re.M))


class TestListen(base.TestCase):

    def test_libvirtd_and_qemu_settings(self):
        libvirtd, qemu = namespace.listen_conf('127.0.0.2', 'compute1')
        conf = _settings(libvirtd)
        self.assertEqual({'listen_tls': '0', 'listen_tcp': '1',
                          'listen_addr': '"127.0.0.2"',
                          'auth_tcp': '"none"'},
                         {k: v for k, v in conf.items() if k != 'host_uuid'})
        uuid.UUID(conf['host_uuid'].strip('"'))
        self.assertEqual({'migration_address': '"127.0.0.2"',
                          'migration_host': '"127.0.0.2"'}, _settings(qemu))

    def test_each_sandbox_its_own_host_uuid(self):
        # libvirt refuses a migration to a host with the source's UUID.
        def host_uuid(*args):
            return _settings(namespace.listen_conf(*args)[0])['host_uuid']
        self.assertEqual(host_uuid('127.0.0.2', 'compute1'),
                         host_uuid('127.0.0.2', 'compute1'))
        self.assertNotEqual(host_uuid('127.0.0.2', 'compute1'),
                            host_uuid('127.0.0.3', 'compute2'))

    def test_only_loopback(self):
        for address, uri in (('127.0.0.3', 'qemu+tcp://127.0.0.3/system'),
                             ('::1', 'qemu+tcp://[::1]/system')):
            sandbox = launcher.Sandbox(self.useFixture(
                fixtures.TempDir()).path, listen=address)
            self.assertEqual(uri, sandbox.tcp_uri)
        for address in ('0.0.0.0', '192.168.1.5', 'compute1', ''):
            self.assertRaises(launcher.SandboxError, launcher.Sandbox,
                              '/nonexistent', listen=address)
        self.assertIsNone(launcher.Sandbox('/nonexistent').tcp_uri)
