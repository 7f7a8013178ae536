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

"""Tiny guests: boot images, domain XML and the work they report."""

import os

import fixtures
from lxml import etree
from oslo_utils.imageutils import format_inspector

from rdt_virt.sandbox import guest
from tests import base


class FakeClock(object):
    now = 10.0

    def __call__(self):
        return self.now


class ImageTest(base.TestCase):

    def test_every_program_is_a_boot_sector(self):
        for name in guest.PROGRAMS:
            sector = guest.boot_sector(name)
            self.assertEqual(512, len(sector), name)
            self.assertEqual(b'\x55\xaa', sector[-2:], name)
        # The work program carries its banner, NUL-terminated.
        self.assertIn(guest.WORK_BANNER.encode() + b'\r\n\0',
                      guest.boot_sector('work'))

    def test_write_image(self):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'work.img')
        self.assertEqual(path, guest.write_image(path, 'work'))
        with open(path, 'rb') as f:
            data = f.read()
        self.assertEqual(guest.IMAGE_SIZE, len(data))
        self.assertEqual(guest.boot_sector('work'), data[:512])

    def test_image_passes_glance_and_nova_inspection(self):
        # The inspector that Glance runs on uploads and Nova on images it
        # boots: an MBR without partitions fails its safety check.
        tmp = self.useFixture(fixtures.TempDir()).path
        for name in guest.PROGRAMS:
            path = guest.write_image(os.path.join(tmp, name), name)
            inspector = format_inspector.detect_file_format(path)
            self.assertEqual('gpt', str(inspector), name)
            inspector.safety_check()

    def test_serial_on_a_file(self):
        dom = etree.fromstring(guest.domain_xml('vm', '/i',
                                                serial_file="/a'b"))
        (serial,) = dom.findall('devices/serial')
        self.assertEqual('file', serial.get('type'))
        self.assertEqual("/a'b", serial.find('source').get('path'))
        dom = etree.fromstring(guest.domain_xml('vm', '/i'))
        self.assertEqual('pty', dom.find('devices/serial').get('type'))


class WorkTest(base.TestCase):

    def test_work_units(self):
        self.assertIsNone(guest.work_units('SeaBIOS...'))
        self.assertEqual(0, guest.work_units('..\r\nrdt-virt work\r\n'))
        self.assertEqual(3, guest.work_units('.\r\nrdt-virt work\r\n...'))
        # The guest restarted: only what follows the last banner counts.
        self.assertEqual(1, guest.work_units(
            'rdt-virt work\r\n....rdt-virt work\r\n.'))

    def test_meter_reads_what_was_added(self):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'serial')
        clock = FakeClock()
        meter = guest.WorkMeter(path, clock=clock)
        self.assertEqual((10.0, None), meter.sample())
        with open(path, 'ab') as f:
            f.write(b'\r\nrdt-vi')
        self.assertEqual((10.0, None), meter.sample())
        with open(path, 'ab') as f:
            f.write(b'rt work\r\n..')
        first = meter.sample()
        self.assertEqual((10.0, 2), first)
        with open(path, 'ab') as f:
            f.write(b'.' * 40)
        clock.now = 12.0
        second = meter.sample()
        self.assertEqual((12.0, 42), second)
        self.assertEqual(20 * guest.WORK_UNIT_BYTES,
                         guest.work_rate(first, second))
        self.assertIsNone(guest.work_rate((9.0, None), second))
        self.assertIsNone(guest.work_rate(second, second))


class CommandTest(base.TestCase):

    def test_guest_image_and_xml(self):
        from rdt_virt.cmd import sandbox as sandbox_cmd

        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'w')
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.assertEqual(0, sandbox_cmd.main(
            ['guest-image', '--program', 'work', path]))
        with open(path, 'rb') as f:
            self.assertEqual(guest.boot_sector('work'), f.read(512))
        self.assertEqual(0, sandbox_cmd.main(
            ['guest-xml', '--image', path, '--serial-file', '/s', 'vm']))
        out.stream.flush()
        text = out.getDetails()['stdout'].as_text()
        dom = etree.fromstring(text[text.index('<domain'):].encode())
        self.assertEqual('/s', dom.find('devices/serial/source').get('path'))
        self.assertEqual(path, dom.find('devices/disk/source').get('file'))
