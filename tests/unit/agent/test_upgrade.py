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

"""The agent's records across an upgrade.

The domain metadata element lives as long as the domain and meets agents
of every release; the state file (with the bandwidth controller's state)
is read by nova-compute and, after a restart, by the agent itself. Each is
read in the form the previous release wrote (``tests/fixtures/upgrade``)
and in plausible newer forms, which are read in part or refused, never
misread (doc/source/admin/upgrade.rst).
"""

import glob
import json
import os
import shutil

import fixtures
from lxml import etree

from nova_plugin.virt import host as host_mod
from rdt_virt.agent import desired
from rdt_virt.agent import domains
from rdt_virt.agent import model
from rdt_virt.agent import protection
from rdt_virt.agent import reconcile
from rdt_virt.agent import state
from rdt_virt import conf
from rdt_virt import exception
from rdt_virt.libvirt import config
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

UPGRADE = os.path.join(base.FIXTURES_DIR, 'upgrade')
RDT_TAG = config.RDTMetadata.TAG
STATE = 'agent-state-v1.json'


def read(name):
    with open(os.path.join(UPGRADE, name)) as fh:
        return fh.read()


def metadata_fixtures():
    found = sorted(os.path.basename(p) for p in glob.glob(
        os.path.join(UPGRADE, 'domain-metadata-v1-*.xml')))
    assert found, 'no domain metadata fixture'
    return found


def rdt_element(xml):
    return etree.fromstring(xml.encode()).find('metadata/' + RDT_TAG)


def changed(xml, change):
    """``xml`` with ``change(element)`` applied to its rdt-virt element."""
    root = etree.fromstring(xml.encode())
    change(root.find('metadata/' + RDT_TAG))
    return etree.tostring(root, encoding='unicode')


class TestOlderDomainMetadata(base.TestCase):

    def test_every_released_form_reads_back_whole(self):
        for name in metadata_fixtures():
            xml = read(name)
            inst = desired.parse(xml)
            self.assertIsNotNone(inst, name)
            # Everything the old writer said survives reading: written
            # again, the element is the same.
            el = rdt_element(xml)
            again = config.RDTMetadata.from_element(el).to_element()
            self.assertEqual(etree.tostring(el, method='c14n'),
                             etree.tostring(again, method='c14n'), name)

    def test_the_agent_applies_what_old_domains_ask(self):
        for name in metadata_fixtures():
            el = rdt_element(read(name))
            inst = desired.parse(read(name))
            membw = el.find('{%s}membw' % config.NAMESPACE)
            if membw is None:
                self.assertIsNone(inst.bandwidth, name)
            else:
                self.assertEqual(
                    (membw.get('unit'), int(membw.get('value'))),
                    (inst.bandwidth.unit, inst.bandwidth.value), name)
            priority = el.find('{%s}priority' % config.NAMESPACE)
            self.assertEqual('normal' if priority is None
                             else priority.get('class'), inst.priority,
                             name)
            monitor = el.find('{%s}monitor' % config.NAMESPACE)
            if monitor is not None:
                self.assertEqual(monitor.get('enabled') == 'yes',
                                 inst.monitor, name)


class TestNewerDomainMetadata(base.TestCase):
    """An element a newer driver wrote, met by this agent."""

    def setUp(self):
        super().setUp()
        self.xml = read('domain-metadata-v1-mbps-low.xml')

    def test_added_elements_and_attributes_are_ignored(self):
        def grow(el):
            el.set('future', 'yes')
            extra = etree.SubElement(el, '{%s}pool' % config.NAMESPACE)
            extra.set('name', 'p1')
            el.find('{%s}membw' % config.NAMESPACE).set('burst', '10')
        self.assertEqual(desired.parse(self.xml),
                         desired.parse(changed(self.xml, grow)))

    def test_unknown_forms_are_refused_not_guessed(self):
        ns = '{%s}' % config.NAMESPACE
        cases = {
            'version': lambda el: el.set('version', '2'),
            'unit': lambda el: el.find(ns + 'membw').set('unit', 'GBps'),
            'group': lambda el: el.find(ns + 'membw').set('group', 'pool'),
            'class': lambda el: el.find(ns + 'priority').set(
                'class', 'critical'),
        }
        for what, change in cases.items():
            e = self.assertRaises(exception.InvalidXML, desired.parse,
                                  changed(self.xml, change))
            self.assertIn('rdt-virt', str(e), what)

    def test_an_ignored_domain_keeps_its_groups_and_threads(self):
        # The agent could not read the domain of U1, whose threads sit in
        # the shared group of 30 % with a monitoring group: it leaves them
        # there, rather than take them for an instance without a policy.
        mon = reconcile._mon_group(f.P, f.U1)
        group = f.group(f.P + 'mb30', tasks=(101, 102),
                        schemata=f.sch(30), mons={mon: (101, 102)})
        result = reconcile.plan({}, {}, f.snap(group), hosts.REFERENCE,
                                reconcile.Settings())
        touched = [a for a in result.actions
                   if isinstance(a, (model.AssignTasks, model.RemoveGroup,
                                     model.RemoveMonGroup))]
        self.assertEqual([], touched)
        self.assertEqual(2, len(result.warnings))


class TestNewerElementInLibvirt(base.TestCase):
    """A running domain with a newer element, through libvirt's test driver.

    The agent skips the domain, says so, and leaves its XML as it is: its
    connection is read-only.
    """

    def test_skipped_and_left_as_it_is(self):
        try:
            import libvirt
        except ImportError:
            self.skipTest('libvirt-python is not installed')
        uri = 'test:///default'
        conn = libvirt.open(uri)
        self.addCleanup(conn.close)
        xml = changed(read('domain-metadata-v1-shared-percent.xml'),
                      lambda el: el.set('version', '2'))
        root = etree.fromstring(xml.encode())
        root.set('type', 'test')
        root.attrib.pop('id')
        etree.SubElement(etree.SubElement(root, 'os'), 'type').text = 'hvm'
        etree.SubElement(root, 'memory').text = '1024'
        dom = conn.createXML(etree.tostring(root, encoding='unicode'))
        self.addCleanup(dom.destroy)
        logger = self.useFixture(fixtures.FakeLogger(level=20))
        source = domains.LibvirtSource(uri)
        source.connect()
        self.addCleanup(source.disconnect)
        self.assertNotIn(dom.UUIDString(), source.instances())
        self.assertIn('Ignoring domain %s' % dom.UUIDString(),
                      logger.output)
        self.assertEqual('2', rdt_element(dom.XMLDesc(0)).get('version'))


class StateFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.doc = json.loads(read(STATE))
        self.logger = self.useFixture(
            fixtures.FakeLogger(level=10, format='%(message)s'))
        self.path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'state.json')
        shutil.copy(os.path.join(UPGRADE, STATE), self.path)
        os.chmod(self.path, 0o644)
        # Fresh: one interval after the sample.
        self.now = self.doc['time'] + self.doc['interval']

    def write(self, doc):
        with open(self.path, 'w') as fh:
            json.dump(doc, fh)

    def newer(self, **changes):
        return dict(self.doc, **changes)

    def protection(self):
        return protection.Protection(conf.CONF.rdt_agent, lambda: 500.0)


class TestOlderStateFile(StateFile):

    def test_readers_take_it(self):
        doc = state.read(self.path)
        self.assertEqual(self.doc, doc)
        self.assertEqual(self.doc['host']['mbm_total_bps'],
                         host_mod.agent_bandwidth(self.path, self.now))

    def test_stale_is_ignored(self):
        late = self.doc['time'] + state.max_age(self.doc) + 1
        self.assertIsNone(host_mod.agent_bandwidth(self.path, late))

    def test_the_controller_takes_its_levels_back(self):
        prot = self.protection()
        prot.resume_file(self.path)
        held = {u: e['level'] for u, e in self.doc['instances'].items()
                if e['level'] is not None}
        self.assertTrue(held)
        self.assertEqual(held, dict(prot.levels))
        domains = self.doc['host']['controller']['domains']
        self.assertEqual({int(d) for d in domains}, set(prot.state.domains))
        for dom, entry in domains.items():
            self.assertEqual(entry['learned_bps'],
                             prot.state.domains[int(dom)].learned)
            # A restart is a dwell: nothing released at once.
            self.assertEqual(500.0, prot.state.domains[int(dom)].last_change)

    def test_no_file_is_a_first_start(self):
        os.unlink(self.path)
        prot = self.protection()
        prot.resume_file(self.path)
        self.assertEqual({}, dict(prot.levels))
        self.assertNotIn('afresh', self.logger.output)


class TestNewerStateFile(StateFile):

    def test_added_fields_are_ignored(self):
        doc = json.loads(read(STATE))
        doc['future'] = {'x': 1}
        doc['host']['future_bps'] = 5.0
        controller = doc['host']['controller']
        controller['future'] = [1]
        for entry in controller['domains'].values():
            entry['future'] = 'x'
        for entry in doc['instances'].values():
            entry['future'] = {'y': 2}
        self.write(doc)
        self.assertEqual(self.doc['host']['mbm_total_bps'],
                         host_mod.agent_bandwidth(self.path, self.now))
        old, new = self.protection(), self.protection()
        old.resume(self.doc)
        new.resume_file(self.path)
        self.assertEqual(old.levels, new.levels)
        self.assertEqual(old.state, new.state)

    def test_another_version_is_ignored_and_said(self):
        for version in (state.VERSION + 1, '1', None):
            self.write(self.newer(version=version))
            self.assertIsNone(state.read(self.path))
            self.assertIsNone(host_mod.agent_bandwidth(self.path, self.now))
            prot = self.protection()
            prot.resume_file(self.path)
            # Not misread: nothing taken back, and the log says why.
            self.assertEqual({}, dict(prot.levels))
            self.assertEqual({}, dict(prot.state.domains))
            self.assertIn('Bandwidth controller starts afresh, without the '
                          'levels it held before the restart: invalid '
                          'rdt-virt state document: version %r' % version,
                          self.logger.output)
