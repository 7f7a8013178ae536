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

"""Hostile domain names, uuids and metadata stay out of group names.

Domain names come from whoever defined the domain; uuids and the rdt-virt
metadata from the domain XML. None of it may escape the resctrl root, make
a name the agent does not recognise as its own (it could never remove
it), or break the state file and the tables that print it.
"""

import json
import os
import tempfile
import unicodedata
from xml.sax import saxutils

from rdt_virt.agent import desired
from rdt_virt.agent import reconcile
from rdt_virt.agent import state
from rdt_virt.cmd import cli
from rdt_virt import exception
from rdt_virt.policy import groups
from rdt_virt.resctrl import fs
from tests import base
from tests.unit.agent import test_desired

UUID = 'aaaaaaaa-0000-4000-8000-000000000007'

# Names XML can carry (no control characters but tab and newline).
NAMES = (
    'instance-00000007',
    'ünïcødé-\U0001f642-инстанс-实例',
    'x' * 1000,
    'new\nline',
    'tab\there',
    '../../../etc/passwd',
    '/abs/path',
    'a/b/../c',
    '..',
    '.',
    '-',
    '\U0001f642' * 40,
    'rdtvirt-mb10',
    'rdtvirt-m-' + UUID,
    'qemu-1-other-vcpus_0',
    'info',
    'tasks',
    '&<>"\'',
)
# What else a name could hold when it does not come through XML.
RAW_NAMES = NAMES + ('   ', '\x1b[2J\x1b[H', 'nul\x00byte', 'bell\x07\r')
ALLOC = ("<cachetune vcpus='0-1' id='vcpus_0-1'><cache id='0' level='3' "
         "type='both' size='2' unit='MiB'/></cachetune>")


def domain(name='instance-00000007', uuid=UUID, cputune='',
           metadata=test_desired.NOVA):
    xml = test_desired.domain(cputune=cputune, metadata=metadata,
                              name=saxutils.escape(name))
    return xml.replace(UUID.upper(), uuid)


class TestLibvirtGroupNames(base.TestCase):

    def test_machine_names_are_safe_group_names(self):
        for name in RAW_NAMES:
            machine = desired.machine_name(123, name)
            group = machine + '-vcpus_0-1'
            fs.validate_group_name(group)
            self.assertTrue(reconcile.is_libvirt_group(group), group)
            self.assertLessEqual(len(machine), 64)
            self.assertNotIn('/', group)
            self.assertTrue(group.isascii(), group)

    def test_domain_names_reach_the_instance_not_the_group(self):
        for name in NAMES:
            inst = desired.parse(domain(name, cputune=ALLOC))
            self.assertEqual(name.strip(), inst.name)
            alloc, = inst.allocations
            fs.validate_group_name(alloc.group)
            self.assertTrue(alloc.group.startswith('qemu-7-'), alloc.group)

    def test_allocation_ids_cannot_escape(self):
        for alloc_id in ('../../x', 'vcpus_0/../../..', 'a/b', 'x\ny',
                         'x y'):
            tune = ALLOC.replace("id='vcpus_0-1'",
                                 "id='%s'" % saxutils.escape(alloc_id))
            self.assertRaises(exception.InvalidXML, desired.parse,
                              domain(cputune=tune))


class TestUuids(base.TestCase):

    def test_hostile_uuids_are_refused(self):
        for uuid in ('../../../etc', 'not-a-uuid', UUID + '/../x',
                     UUID + '\nx', 'rdtvirt-mb10', UUID + 'x'):
            self.assertRaises(exception.InvalidXML, desired.parse,
                              domain(uuid=saxutils.escape(uuid)))

    def test_uuids_are_canonical(self):
        # libvirt accepts a uuid without dashes or in upper case; group
        # names and /proc matching need the one canonical form.
        for uuid in (UUID.upper(), UUID.replace('-', ''),
                     '{%s}' % UUID):
            inst = desired.parse(domain(uuid=uuid))
            self.assertEqual(UUID, inst.uuid)
            self.assertEqual(groups.parse('p-', groups.mon_group(
                'p-', inst.uuid)), ('monitor', inst.uuid))


class TestMetadataNames(base.TestCase):

    def test_shared_percent_out_of_range_is_refused(self):
        # rdtvirt-mb1000 would be a group the agent cannot recognise as
        # its own, so it could never remove it.
        for value in ('101', '1000', '99999999999'):
            meta = test_desired.NOVA + test_desired.RDT % (
                '<rdtvirt:membw unit="percent" value="%s" group="shared"/>'
                % value)
            self.assertRaises(exception.InvalidXML, desired.parse,
                              domain(metadata=meta))

    def test_every_shared_name_is_recognised(self):
        for pct in range(1, 101):
            name = groups.shared_group('rdtvirt-', pct)
            self.assertEqual(('shared', pct), groups.parse('rdtvirt-', name))


class TestPublishedNames(base.TestCase):

    def doc(self):
        return {'time': 0, 'interval': 10, 'host': {}, 'instances': {
            '%08d-0000-4000-8000-000000000000' % i: {
                'name': name, 'group': None, 'policy': {},
                'mbm_total_bps': None, 'mbm_local_bps': None,
                'llc_occupancy_bytes': None, 'reason': 'r'}
            for i, name in enumerate(RAW_NAMES)}}

    def test_state_file_keeps_names(self):
        path = os.path.join(tempfile.mkdtemp(), 'state.json')
        self.addCleanup(os.unlink, path)
        doc = self.doc()
        state.write(path, doc)
        with open(path) as f:
            self.assertEqual(1, len(f.read().splitlines()))
        self.assertEqual(doc['instances'], state.read(path)['instances'])
        json.dumps(doc)

    def test_top_table_one_line_per_instance_no_control_characters(self):
        text = cli.top_table(self.doc())
        lines = text.splitlines()
        # Header line, column titles, one row per instance, the host row.
        self.assertEqual(len(RAW_NAMES) + 3, len(lines), text)
        for line in lines:
            bad = [c for c in line
                   if unicodedata.category(c).startswith('C')]
            self.assertEqual([], bad, repr(line))
