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

"""The libvirt source, against libvirt's in-process test driver."""

import queue
from unittest import mock
import uuid as uuid_mod

from rdt_virt.agent import domains
from rdt_virt.agent import model
from rdt_virt import exception
from tests import base

URI = 'test:///default'
RDT = ('<rdtvirt:rdt xmlns:rdtvirt="http://openstack.org/xmlns/libvirt/'
       'rdt-virt/1.0" version="1"><rdtvirt:membw unit="percent" value="%d" '
       'group="shared"/></rdtvirt:rdt>')


def xml(name, uuid, pct=10, nova=True):
    meta = ('<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/'
            'nova/1.1"><nova:name>x</nova:name></nova:instance>'
            if nova else '') + (RDT % pct)
    return ("<domain type='test'><name>%s</name><uuid>%s</uuid><memory>"
            "1024</memory><vcpu>2</vcpu><metadata>%s</metadata><os><type>"
            "hvm</type></os></domain>" % (name, uuid, meta))


class TestLibvirtSource(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            import libvirt
        except ImportError:
            self.skipTest('libvirt-python is not installed')
        self.libvirt = libvirt
        self.conn = libvirt.open(URI)
        self.addCleanup(self.conn.close)
        self.source = domains.LibvirtSource(URI)
        self.source.connect()
        self.addCleanup(self.source.disconnect)

    def boot(self, nova=True, pct=10):
        uuid = str(uuid_mod.uuid4())
        dom = self.conn.createXML(xml('instance-' + uuid[:8], uuid, pct,
                                      nova))

        def destroy():
            try:
                dom.destroy()
            except self.libvirt.libvirtError:
                pass
        self.addCleanup(destroy)
        return uuid, dom

    def event(self, kind, uuid):
        while True:
            ev = self.source.events.get(timeout=5)
            if ev.uuid == uuid:
                self.assertEqual(kind, ev.kind)
                return ev

    def test_connection_is_read_only(self):
        # The agent must not be able to change a domain: its connection is
        # refused every write, while reads and events work.
        uuid, _dom = self.boot()
        self.assertIn(uuid, self.source.instances())
        dom = self.source._conn.lookupByUUIDString(uuid)
        e = self.assertRaises(self.libvirt.libvirtError, dom.suspend)
        self.assertEqual(self.libvirt.VIR_ERR_OPERATION_DENIED,
                         e.get_error_code())
        self.assertRaises(self.libvirt.libvirtError, dom.destroy)
        self.assertTrue(dom.isActive())

    def test_nova_domains_only(self):
        uuid, _dom = self.boot()
        other, _dom2 = self.boot(nova=False)
        found = self.source.instances()
        self.assertIn(uuid, found)
        self.assertNotIn(other, found)
        self.assertEqual(model.BandwidthPolicy('percent', 10, 10,
                                               model.SHARED),
                         found[uuid].bandwidth)

    def test_lifecycle_events(self):
        uuid, dom = self.boot()
        self.event(domains.STARTED, uuid)
        dom.destroy()
        self.event(domains.STOPPED, uuid)
        self.assertNotIn(uuid, self.source.instances())

    def test_xml_cached_until_an_event(self):
        uuid, dom = self.boot()
        # The start event drops the cache entry; let it pass first.
        self.event(domains.STARTED, uuid)
        first = self.source.instances()[uuid]
        calls = []
        real = self.source._parse

        def counting(d):
            calls.append(d.UUIDString())
            return real(d)
        self.source._parse = counting
        self.assertIs(first, self.source.instances()[uuid])
        self.assertEqual([], calls)
        dom.setMetadata(self.libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                        RDT.replace('rdtvirt:', '').replace(
                            ' xmlns:rdtvirt="http://openstack.org/xmlns/'
                            'libvirt/rdt-virt/1.0"', '') % 20,
                        'rdtvirt', 'http://openstack.org/xmlns/libvirt/'
                        'rdt-virt/1.0', 0)
        self.event(domains.CHANGED, uuid)
        self.assertEqual(20, self.source.instances()[uuid].bandwidth.value)
        self.assertEqual([uuid], calls)

    def test_instance_lookup(self):
        uuid, dom = self.boot(pct=30)
        self.assertEqual(30, self.source.instance(uuid).bandwidth.value)
        dom.destroy()
        self.assertIsNone(self.source.instance(uuid))

    def test_instance_of_a_defined_domain_only_while_it_runs(self):
        uuid = str(uuid_mod.uuid4())
        dom = self.conn.defineXML(xml('instance-' + uuid[:8], uuid, 40))
        self.addCleanup(dom.undefine)
        # The lookup says whether it runs (its id): no second call.
        with mock.patch.object(self.libvirt.virDomain, 'isActive',
                               side_effect=AssertionError):
            self.assertIsNone(self.source.instance(uuid))
            dom.create()
            self.addCleanup(dom.destroy)
            self.assertEqual(40, self.source.instance(uuid).bandwidth.value)

    def test_lost_connection(self):
        self.source._on_close(self.source._conn, 0, None)
        self.assertFalse(self.source.connected)
        self.assertRaises(exception.RDTVirtException, self.source.instances)
        self.source.connect()
        self.assertTrue(self.source.connected)

    def test_no_events_for_other_kinds(self):
        uuid, dom = self.boot()
        self.event(domains.STARTED, uuid)
        dom.suspend()
        self.assertRaises(queue.Empty, self.source.events.get, timeout=0.3)
