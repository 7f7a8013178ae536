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

"""Resctrl against copies of the fixture trees.

A plain directory cannot refuse a write, so the kernel's errors (EINVAL with
``last_cmd_status``, ESRCH, ENOSPC, EBUSY) are injected at the system call.
Locking is tested for real: flock works on any directory.
"""

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from unittest import mock

import testscenarios

from rdt_virt import exception
from rdt_virt.resctrl import fs
from tests import base
from tests.unit.resctrl import variants

MonValue = fs.MonValue


def mountinfo_line(mount_point, options, fstype='resctrl'):
    escaped = mount_point.replace('\\', '\\134').replace(' ', '\\040')
    return ('35 22 0:33 / %s rw,relatime shared:15 - %s resctrl %s\n'
            % (escaped, fstype, ','.join(('rw',) + tuple(options))))


class ResctrlTestCase(base.TestCase):

    def make(self, variant, mount_options=None):
        """A Resctrl on a fresh copy of ``variant`` and its mountinfo."""
        self.tree = self.useFixture(variants.ResctrlTree(variant))
        if mount_options is None:
            mount_options = variants.MOUNT_OPTIONS.get(variant, ())
        mountinfo = os.path.join(tempfile.mkdtemp(), 'mountinfo')
        with open(mountinfo, 'w') as f:
            f.write('22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n')
            if variant != 'none':
                f.write(mountinfo_line(self.tree.root, mount_options))
        return fs.Resctrl(self.tree.root, prefix='rdtvirt-',
                          mountinfo=mountinfo)


class TestFixtureTree(testscenarios.WithScenarios, ResctrlTestCase):

    scenarios = variants.scenarios()

    def setUp(self):
        super().setUp()
        self.rc = self.make(self.variant)
        self.caps = variants.CAPABILITIES[self.variant]
        self.groups = variants.GROUPS[self.variant]

    def require_rdt(self):
        if self.caps is None:
            self.skipTest('no RDT on this variant')

    def test_is_mounted(self):
        self.assertEqual(self.caps is not None, self.rc.is_mounted())

    def test_capabilities(self):
        if self.caps is None:
            self.assertRaises(exception.ResctrlNotMounted,
                              self.rc.capabilities)
            return
        self.assertEqual(self.caps, self.rc.capabilities())

    def test_mount_options(self):
        expected = set(variants.MOUNT_OPTIONS.get(self.variant, ()))
        if self.caps is not None:
            expected.update(('rw', 'relatime'))
        self.assertEqual(expected, self.rc.mount_options())

    def test_list_groups_and_ownership(self):
        if self.caps is None:
            self.assertRaises(exception.ResctrlNotMounted,
                              self.rc.list_groups)
            return
        self.assertEqual(self.groups, self.rc.list_groups())
        owned = [g for g in self.groups if self.rc.owns(g)]
        self.assertEqual([g for g in self.groups
                          if g.startswith('rdtvirt-')], owned)
        self.assertNotIn('batch', owned)
        self.assertNotIn(variants.LIBVIRT_GROUP, owned)

    def test_mon_groups(self):
        self.require_rdt()
        if self.caps.monitor is None:
            exc = self.assertRaises(exception.ResctrlError,
                                    self.rc.list_mon_groups)
            self.assertIn('monitoring is not available', str(exc))
            return
        self.assertEqual(variants.ROOT_MON_GROUPS,
                         self.rc.list_mon_groups())
        if 'batch' in self.groups:
            self.assertEqual(['job-7'], self.rc.list_mon_groups('batch'))
        if variants.SHARED in self.groups:
            self.assertEqual(sorted([variants.MON_B, variants.MON_C]),
                             self.rc.list_mon_groups(variants.SHARED))
        if variants.LIBVIRT_GROUP in self.groups:
            self.assertEqual(
                [], self.rc.list_mon_groups(variants.LIBVIRT_GROUP))

    def test_read_control_files(self):
        self.require_rdt()
        root = self.rc.read_schemata()
        self.assertEqual(set(self.caps.caches) | set(self.caps.membw),
                         set(root))
        self.assertEqual(set(root), set(self.rc.read_size()))
        self.assertEqual('shareable', self.rc.read_mode())
        self.assertIn(1, self.rc.read_tasks())
        ncpus = 64 if self.variant == 'amd' else 96
        self.assertEqual(set(range(ncpus)), self.rc.read_cpus())
        if 'batch' in self.groups:
            self.assertEqual([5001, 5002], self.rc.read_tasks('batch'))
            self.assertEqual({ncpus - 2, ncpus - 1},
                             self.rc.read_cpus('batch'))
        if variants.LIBVIRT_GROUP in self.groups and self.caps.caches:
            sch = self.rc.read_schemata(variants.LIBVIRT_GROUP)
            first = min(self.caps.caches.values(), key=lambda r: r.name)
            # Two dedicated ways on the first cache only (code and data
            # split them under CDP).
            dom0 = sorted(first.domain_ids)[0]
            self.assertIn(sch[first.name][dom0], (0x1, 0x3, 0xc, 0xf))
            self.assertEqual([4101, 4102],
                             self.rc.read_tasks(variants.LIBVIRT_GROUP))

    def test_write_schemata_partial(self):
        self.require_rdt()
        if not self.caps.caches:
            self.skipTest('no cache allocation')
        res = sorted(self.caps.caches)[0]
        dom = self.caps.caches[res].domain_ids[-1]
        self.rc.write_schemata('batch', {res: {dom: 0x30}})
        self.assertEqual('%s:%d=30\n' % (res, dom),
                         self.tree.read('batch', 'schemata'))
        self.rc.write_schemata(None, 'MB:0=10\n')
        self.assertEqual('MB:0=10\n', self.tree.read('schemata'))

    def test_create_and_remove_owned_group(self):
        self.require_rdt()
        self.rc.create_group('rdtvirt-mb20')
        self.assertIn('rdtvirt-mb20', self.rc.list_groups())
        self.assertRaises(exception.GroupExists, self.rc.create_group,
                          'rdtvirt-mb20')
        self.rc.remove_group('rdtvirt-mb20')
        self.assertEqual(self.groups, self.rc.list_groups())
        self.assertRaises(exception.GroupNotFound, self.rc.remove_group,
                          'rdtvirt-mb20')

    def test_foreign_groups_are_refused(self):
        self.require_rdt()
        for call, args in [(self.rc.create_group, ('other',)),
                           (self.rc.remove_group, ('batch',)),
                           (self.rc.remove_group,
                            (variants.LIBVIRT_GROUP,)),
                           (self.rc.create_mon_group, ('job-8', 'batch')),
                           (self.rc.remove_mon_group, ('job-7', 'batch'))]:
            exc = self.assertRaises(exception.NotOwned, call, *args)
            self.assertIn('rdtvirt-', str(exc))
        # Explicitly allowed (libvirt groups of Nova's domains).
        self.rc.create_group('qemu-3-instance-00000003-vcpus_0',
                             foreign_ok=True)
        self.rc.remove_group('qemu-3-instance-00000003-vcpus_0',
                             foreign_ok=True)

    def test_mon_group_lifecycle(self):
        self.require_rdt()
        name = 'rdtvirt-m-' + variants.UUID_A
        if self.caps.monitor is None:
            exc = self.assertRaises(exception.ResctrlError,
                                    self.rc.create_mon_group, name)
            self.assertIn('monitoring is not available', str(exc))
            return
        self.rc.create_mon_group(name)
        self.assertIn(name, self.rc.list_mon_groups())
        self.assertRaises(exception.GroupExists, self.rc.create_mon_group,
                          name)
        self.assertRaises(exception.GroupNotFound, self.rc.create_mon_group,
                          name, 'rdtvirt-nope')
        if self.groups:
            target = self.groups[-1]
            self.rc.move_mon_group(name, None, target)
            self.assertIn(name, self.rc.list_mon_groups(target))
            self.assertNotIn(name, self.rc.list_mon_groups())
            exc = self.assertRaises(exception.GroupNotFound,
                                    self.rc.move_mon_group, name, target,
                                    'rdtvirt-nope')
            self.assertEqual('rdtvirt-nope', exc.kwargs['group'])
            self.rc.move_mon_group(name, target, None)
        self.rc.remove_mon_group(name)
        self.assertEqual(variants.ROOT_MON_GROUPS,
                         self.rc.list_mon_groups())
        exc = self.assertRaises(exception.GroupNotFound,
                                self.rc.remove_mon_group, name)
        self.assertEqual('mon_groups/' + name, exc.kwargs['group'])

    def test_tasks_and_cpus(self):
        self.require_rdt()
        group = self.groups[-1] if self.groups else None
        self.assertEqual(([7001, 7002], []),
                         self.rc.add_tasks([7001, '7002'], group))
        self.assertEqual([7001, 7002], self.rc.read_tasks(group))
        self.rc.write_cpus({3, 0, 1, 2, 8}, group)
        self.assertEqual('0-3,8', self.tree.read(
            *([group] if group else []) + ['cpus_list']))
        self.assertEqual({0, 1, 2, 3, 8}, self.rc.read_cpus(group))
        self.rc.write_cpus(set(), group)
        self.assertEqual(set(), self.rc.read_cpus(group))

    def test_read_mon_data(self):
        self.require_rdt()
        if self.caps.monitor is None:
            self.assertEqual([], self.rc.mon_domain_ids())
            self.assertRaises(exception.ResctrlError, self.rc.read_mon_data)
            return
        doms = self.caps.monitor.domain_ids
        self.assertEqual(list(doms), self.rc.mon_domain_ids())
        root = self.rc.read_mon_data()
        self.assertEqual(set(doms), set(root))
        for dom in doms:
            self.assertEqual({'llc_occupancy', 'mbm_total_bytes',
                              'mbm_local_bytes'}, set(root[dom]))
            for value in root[dom].values():
                self.assertIsNone(value.reason)
                self.assertGreater(value.value, 0)
        # A fresh libvirt monitor has no local bandwidth yet on one domain.
        mon = self.rc.read_mon_data(None, variants.LIBVIRT_MON)
        self.assertEqual(MonValue(None, 'Unavailable'),
                         mon[doms[1]]['mbm_local_bytes'])
        self.assertIsNotNone(mon[doms[0]]['mbm_local_bytes'].value)
        if 'batch' in self.groups:
            job = self.rc.read_mon_data('batch', 'job-7',
                                        events=['llc_occupancy'])
            self.assertEqual({dom: ['llc_occupancy'] for dom in doms},
                             {d: list(v) for d, v in job.items()})
            self.assertEqual(MonValue(None, 'Error'),
                             job[doms[0]]['llc_occupancy'])

    def test_group_counters_include_mon_groups(self):
        self.require_rdt()
        if variants.SHARED not in self.groups:
            self.skipTest('no shared group')
        total = self.rc.read_mon_data(variants.SHARED)
        for dom, events in total.items():
            for event, value in events.items():
                own_and_mons = [
                    self.rc.read_mon_data(variants.SHARED, m)[dom][event]
                    .value for m in (variants.MON_B, variants.MON_C)]
                self.assertGreater(value.value, sum(own_and_mons))


class TestMountInfo(ResctrlTestCase):

    def _options(self, lines, root):
        path = os.path.join(tempfile.mkdtemp(), 'mountinfo')
        with open(path, 'w') as f:
            f.writelines(lines)
        return fs.Resctrl(root, mountinfo=path).mount_options()

    def test_table(self):
        root = '/sys/fs/resctrl'
        table = [
            ([], frozenset()),
            (['garbage\n', '1 2 3\n'], frozenset()),
            ([mountinfo_line(root, ('cdp',))],
             {'rw', 'relatime', 'cdp'}),
            ([mountinfo_line(root, ('cdp', 'mba_MBps'))],
             {'rw', 'relatime', 'cdp', 'mba_MBps'}),
            ([mountinfo_line('/sys/fs/resctrl2', ('cdp',))], frozenset()),
            # Stacked mounts: the last one is what the path shows.
            ([mountinfo_line(root, ('cdp',)),
              mountinfo_line(root, ('mba_MBps',))],
             {'rw', 'relatime', 'mba_MBps'}),
            # No optional fields before the separator.
            (['35 22 0:33 / %s rw - resctrl resctrl rw,cdpl2\n' % root],
             {'rw', 'cdpl2'}),
        ]
        for lines, expected in table:
            self.assertEqual(expected, self._options(lines, root), lines)

    def test_escaped_mount_point(self):
        tmp = tempfile.mkdtemp()
        root = os.path.join(tmp, 'res ctrl')
        shutil.copytree(variants.path('cdp'), root)
        options = self._options([mountinfo_line(root, ('cdp',))], root)
        self.assertIn('cdp', options)

    def test_kernel_release_limits_closids(self):
        tree = os.path.join(tempfile.mkdtemp(), 'resctrl')
        shutil.copytree(variants.path('l3-cat'), tree)
        with open(os.path.join(tree, 'info', 'L3', 'num_closids'), 'w') as f:
            f.write('64\n')
        release = os.path.join(tempfile.mkdtemp(), 'osrelease')
        for text, expected in (('6.8.0-45-generic\n', 32),
                               ('6.16.2\n', 64), (None, 64)):
            if text is not None:
                with open(release, 'w') as f:
                    f.write(text)
            rc = fs.Resctrl(tree, osrelease=release if text else
                            '/nonexistent/osrelease')
            self.assertEqual(text and text.strip(), rc.kernel_release())
            self.assertEqual(expected, rc.capabilities().num_closids, text)

    def test_remount_seen(self):
        root = '/sys/fs/resctrl'
        path = os.path.join(tempfile.mkdtemp(), 'mountinfo')
        rc = fs.Resctrl(root, mountinfo=path)
        for options in (('cdp',), ('cdp',), ('mba_MBps',), ()):
            with open(path, 'w') as f:
                f.write(mountinfo_line(root, options))
            self.assertEqual({'rw', 'relatime'} | set(options),
                             rc.mount_options())

    def test_unreadable_mountinfo(self):
        rc = fs.Resctrl('/sys/fs/resctrl', mountinfo='/nonexistent/mi')
        self.assertEqual(frozenset(), rc.mount_options())

    def test_mba_mbps_from_mountinfo(self):
        # The unit comes from the mount when the values do not tell: an
        # operator may have lowered the default group's MBps.
        rc = self.make('mba-mbps')
        self.tree.write('MB:0=5000;1=5000\nL3:0=7f0;1=7f0\n', 'schemata')
        self.assertEqual('MBps', rc.capabilities().mb.unit)
        rc = self.make('mba-mbps', mount_options=())
        self.tree.write('MB:0=5000;1=5000\nL3:0=7f0;1=7f0\n', 'schemata')
        self.assertEqual('MBps', rc.capabilities().mb.unit)


class TestErrors(ResctrlTestCase):

    def setUp(self):
        super().setUp()
        self.rc = self.make('reference')
        self._os_write = os.write

    def _refuse(self, err, status, when=lambda data: True):
        """An os.write that fails like the kernel, leaving ``status``."""
        def write(fd, data):
            if when(data):
                self.tree.write(status + '\n', 'info', 'last_cmd_status')
                raise OSError(err, os.strerror(err))
            return self._os_write(fd, data)
        return mock.patch.object(fs.os, 'write', side_effect=write)

    def test_schemata_einval_carries_last_cmd_status(self):
        status = 'The mask f0f has non-consecutive 1-bits'
        with self._refuse(errno.EINVAL, status):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.write_schemata, 'batch',
                                    {'L3': {0: 0xf0f}})
        self.assertEqual(errno.EINVAL, exc.errno)
        self.assertEqual(status, exc.status)
        self.assertIn(status, str(exc))
        self.assertIn('L3:0=f0f', str(exc))
        self.assertTrue(exc.path.endswith('/batch/schemata'))

    def test_status_cleared_by_another_reader_is_never_ok(self):
        # Between the failed write and the read of last_cmd_status another
        # reader cleared it (kernels that clear it at every group file
        # access): the errno's meaning explains the failure, never "ok".
        with self._refuse(errno.EINVAL, 'ok'):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.write_schemata, 'batch',
                                    {'L3': {0: 0xf0f}})
        self.assertNotEqual('ok', exc.status)
        self.assertTrue(exc.status.startswith('Invalid argument'),
                        exc.status)
        with self._refuse(errno.ENOSPC, ''):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.write_schemata, 'batch',
                                    {'L3': {0: 0x7f0}})
        self.assertTrue(exc.status.startswith('No space left on device'),
                        exc.status)

    def test_mode_refused(self):
        status = 'Mode unchanged'
        with self._refuse(errno.EINVAL, status):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.write_mode, 'batch', 'exclusive')
        self.assertEqual(status, exc.status)

    def test_mode_written_with_its_newline(self):
        # The kernel answers EINVAL to a mode without the newline.
        with self._refuse(errno.EINVAL, '',
                          when=lambda data: not data.endswith(b'\n')):
            self.rc.write_mode('batch', 'exclusive')
        self.assertEqual('exclusive\n', self.tree.read('batch', 'mode'))

    def test_exited_threads_are_not_errors(self):
        with self._refuse(errno.ESRCH, 'No task 7002',
                          when=lambda data: data == b'7002\n'):
            moved, gone = self.rc.add_tasks([7001, 7002, 7003], 'batch')
        self.assertEqual(([7001, 7003], [7002]), (moved, gone))
        self.assertEqual([7001, 7003], self.rc.read_tasks('batch'))

    def test_tasks_refused_part_way(self):
        status = "Can't move task to different control group"
        with self._refuse(errno.EINVAL, status,
                          when=lambda data: data == b'7002\n'):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.add_tasks, [7001, 7002, 7003],
                                    'batch', 'job-7')
        self.assertEqual('7002\n', exc.kwargs['data'])
        self.assertEqual(status, exc.status)
        # Threads before the failing one have moved.
        self.assertEqual([7001], self.rc.read_tasks('batch', 'job-7'))

    def test_mkdir_errors(self):
        # errno, exception, status
        table = [
            (errno.ENOSPC, exception.NoSpace, 'out of CLOSIDs'),
            (errno.EBUSY, exception.RMIDBusy, 'RMIDs in limbo'),
            (errno.EPERM, exception.ResctrlError, 'not allowed'),
        ]
        for err, exc_class, status in table:
            self.tree.write(status + '\n', 'info', 'last_cmd_status')
            with mock.patch.object(fs.os, 'mkdir',
                                   side_effect=OSError(err, 'x')):
                exc = self.assertRaises(exc_class, self.rc.create_mon_group,
                                        'rdtvirt-m-' + variants.UUID_A)
            self.assertIn(status, str(exc))
            self.assertIn(os.strerror(err) if exc_class is
                          exception.ResctrlError else status, str(exc))

    def test_rmdir_and_rename_errors(self):
        # A plain directory refuses for real: the group still has files.
        exc = self.assertRaises(exception.ResctrlError, self.rc.remove_group,
                                variants.SHARED)
        self.assertIn(os.strerror(errno.ENOTEMPTY), str(exc))
        self.assertIn('ok', str(exc))
        self.tree.write('Group busy\n', 'info', 'last_cmd_status')
        with mock.patch.object(fs.os, 'rmdir',
                               side_effect=OSError(errno.EBUSY, 'x')):
            exc = self.assertRaises(exception.ResctrlError,
                                    self.rc.remove_group, variants.SHARED)
        self.assertIn('Group busy', str(exc))
        with mock.patch.object(fs.os, 'rename',
                               side_effect=OSError(errno.EINVAL, 'x')):
            exc = self.assertRaises(exception.ResctrlError,
                                    self.rc.move_mon_group, variants.MON_B,
                                    variants.SHARED, None)
        self.assertIn('Group busy', str(exc))

    def test_rename_refused_by_kernels_before_6_5(self):
        # kernfs answers EPERM without touching last_cmd_status.
        self.tree.write('Group busy\n', 'info', 'last_cmd_status')
        with mock.patch.object(fs.os, 'rename',
                               side_effect=OSError(errno.EPERM, 'x')):
            exc = self.assertRaises(exception.RenameRefused,
                                    self.rc.move_mon_group, variants.MON_B,
                                    variants.SHARED, None)
        self.assertNotIn('Group busy', str(exc))

    def test_read_refused(self):
        # Some kernels answer EIO for a group in error, at open or read.
        for call in ('open', 'read'):
            with mock.patch.object(fs.os, call,
                                   side_effect=OSError(errno.EIO, 'x')):
                exc = self.assertRaises(exception.ResctrlError,
                                        self.rc.read_tasks, 'batch')
            self.assertIn(os.strerror(errno.EIO), str(exc))

    def test_long_files_are_read_whole(self):
        tids = list(range(1, 20001))
        self.tree.write(''.join('%d\n' % t for t in tids), 'batch', 'tasks')
        self.assertEqual(tids, self.rc.read_tasks('batch'))

    def test_open_refused(self):
        with mock.patch.object(fs.os, 'open',
                               side_effect=PermissionError(errno.EACCES,
                                                           'x')):
            exc = self.assertRaises(exception.ResctrlWriteError,
                                    self.rc.write_cpus, {1}, 'batch')
        self.assertEqual(errno.EACCES, exc.errno)
        self.assertIn('ok', exc.status)

    def test_missing_files_and_groups(self):
        exc = self.assertRaises(exception.GroupNotFound,
                                self.rc.read_schemata, 'rdtvirt-nope')
        self.assertEqual('rdtvirt-nope', exc.kwargs['group'])
        exc = self.assertRaises(exception.GroupNotFound, self.rc.read_tasks,
                                'batch', 'job-8')
        self.assertEqual('batch/mon_groups/job-8', exc.kwargs['group'])
        self.assertRaises(exception.GroupNotFound, self.rc.write_schemata,
                          'rdtvirt-nope', 'MB:0=10')
        self.assertRaises(exception.GroupNotFound, self.rc.add_tasks, [1],
                          'rdtvirt-nope')
        self.assertRaises(exception.GroupNotFound, self.rc.read_mon_data,
                          'rdtvirt-nope')
        # The group exists, the file does not (an older kernel).
        os.unlink(self.tree.path('batch', 'size'))
        exc = self.assertRaises(exception.ResctrlError, self.rc.read_size,
                                'batch')
        self.assertNotIsInstance(exc, exception.GroupNotFound)
        self.assertIn('no such file', str(exc))

    def test_not_mounted(self):
        rc = fs.Resctrl(os.path.join(tempfile.mkdtemp(), 'absent'))
        self.assertFalse(rc.is_mounted())
        for call in (rc.capabilities, rc.list_groups, rc.read_schemata,
                     rc.read_info, lambda: rc.create_group('rdtvirt-mb10'),
                     lambda: rc.write_schemata(None, 'MB:0=10')):
            self.assertRaises(exception.ResctrlNotMounted, call)
        self.assertEqual([], rc.mon_domain_ids())

    def test_last_cmd_status(self):
        self.assertEqual('ok', self.rc.last_cmd_status())
        os.unlink(self.tree.path('info', 'last_cmd_status'))
        self.assertIn('unreadable', self.rc.last_cmd_status())

    def test_mon_data_sentinels_and_read_errors(self):
        base_dir = ('mon_groups', variants.MON_D, 'mon_data', 'mon_L3_00')
        self.tree.write('Unassigned\n', *base_dir + ('mbm_total_bytes',))
        self.tree.write('n/a\n', *base_dir + ('llc_occupancy',))
        real_open = open

        def fake_open(path, *args, **kwargs):
            if path.endswith('mon_L3_00/mbm_local_bytes'):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_open(path, *args, **kwargs)

        with mock.patch('builtins.open', side_effect=fake_open):
            data = self.rc.read_mon_data(None, variants.MON_D)
        self.assertEqual(MonValue(None, 'Unassigned'),
                         data[0]['mbm_total_bytes'])
        self.assertEqual(MonValue(None, "unparsable 'n/a'"),
                         data[0]['llc_occupancy'])
        self.assertEqual(MonValue(None, os.strerror(errno.EIO)),
                         data[0]['mbm_local_bytes'])
        self.assertIsNotNone(data[1]['mbm_local_bytes'].value)
        # An event this kernel does not have is left out, not an error.
        self.assertEqual({0: {}, 1: {}}, self.rc.read_mon_data(
            None, variants.MON_D, events=['mbm_total_bytes_config']))


class TestPureHelpers(base.TestCase):

    def test_parse_mon_value(self):
        for text, expected in [
                ('12386304\n', MonValue(12386304, None)),
                ('0', MonValue(0, None)),
                ('Unavailable\n', MonValue(None, 'Unavailable')),
                ('Error', MonValue(None, 'Error')),
                ('Unassigned', MonValue(None, 'Unassigned')),
                ('', MonValue(None, "unparsable ''"))]:
            self.assertEqual(expected, fs.parse_mon_value(text))

    def test_mon_value_is_an_unsigned_decimal(self):
        # int() also takes signs, underscores and non-ASCII digits, and
        # raises beyond 4300 digits: none of that is a byte counter.
        for text in ('-1', '+5', '1_000', '\u0663', '0x10', '1.5',
                     '9' * 21, '9' * 5000):
            value = fs.parse_mon_value(text)
            self.assertIsNone(value.value, text)
            self.assertTrue(value.reason.startswith('unparsable'))
        self.assertEqual(2 ** 64 - 1,
                         fs.parse_mon_value(str(2 ** 64 - 1)).value)

    def test_mon_bytes_parse_as_the_text(self):
        for text in ('12386304\n', '0', '', '\n', 'Unavailable\n', 'Error',
                     'Unassigned\n', 'Unavailable\n\n', ' 7\n', '7 \n',
                     '-1\n', '+5', '1_000', '\u0663\n', '0x10', '1.5',
                     '9' * 20 + '\n', '9' * 21 + '\n', '9' * 5000,
                     str(2 ** 64 - 1) + '\n', '12\r\n', 'n/a\n'):
            self.assertEqual(fs.parse_mon_value(text),
                             fs.parse_mon_bytes(text.encode()), repr(text))

    def test_tasks_and_cpu_lists_refuse_garbage(self):
        for text in ('-1', '1_0', '\u0663', '1.5', '9' * 11, 'x'):
            self.assertRaises(ValueError, fs.parse_tasks, text)
        self.assertEqual([1, 42], fs.parse_tasks('1\n42\n'))
        # A huge range would take all memory: refused, and at once.
        for text in ('0-99999999999', '0-65536', '5-3', '1_0', '\u0663',
                     '-1', '0--1', '9' * 5000):
            self.assertRaises(ValueError, fs.parse_cpu_list, text)
        self.assertEqual(set(range(65536)), fs.parse_cpu_list('0-65535'))

    def test_cpu_lists(self):
        for text, cpus, formatted in [
                ('0-3,8\n', {0, 1, 2, 3, 8}, '0-3,8'),
                ('', set(), ''),
                ('\n', set(), ''),
                ('5', {5}, '5'),
                ('0-23,48-71', set(range(24)) | set(range(48, 72)),
                 '0-23,48-71'),
                ('1,2,3', {1, 2, 3}, '1-3')]:
            self.assertEqual(cpus, fs.parse_cpu_list(text))
            self.assertEqual(formatted, fs.format_cpu_list(cpus))

    def test_group_names(self):
        good = ['rdtvirt-mb10', 'rdtvirt-i-' + variants.UUID_E,
                variants.LIBVIRT_GROUP, 'batch', 'a', 'x' * 255,
                'job_7.v2:a+b@c']
        for name in good:
            fs.validate_group_name(name)
        bad = ['', '.', '..', '../rdtvirt-x', 'rdtvirt-x/../../etc',
               '/etc', 'a/b', 'rdtvirt-x\n', '\nrdtvirt-x', 'a b',
               'a\x00b', 'x' * 256, 'info', 'mon_groups', 'mon_data',
               'tasks', 'schemata', 'cpus_list', 'mode', 'size',
               'rdtvirt-\u00e9', None, 42, b'rdtvirt-x']
        for name in bad:
            self.assertRaises(exception.InvalidGroupName,
                              fs.validate_group_name, name)

    def test_paths_stay_below_the_root(self):
        rc = fs.Resctrl('/sys/fs/resctrl')
        self.assertEqual('/sys/fs/resctrl/schemata',
                         rc.path(None, None, 'schemata'))
        self.assertEqual('/sys/fs/resctrl/g/mon_groups/m/tasks',
                         rc.path('g', 'm', 'tasks'))
        self.assertEqual('/sys/fs/resctrl/mon_groups/m',
                         rc.path(None, 'm'))
        for group, mon in [('..', None), ('g', '../../x'), ('a/b', None)]:
            self.assertRaises(exception.InvalidGroupName, rc.path, group,
                              mon)
        self.assertRaises(exception.InvalidGroupName, rc.create_group,
                          'rdtvirt-../x')

    def test_paths_remembered_and_names_still_checked(self):
        rc = fs.Resctrl('/sys/fs/resctrl')
        first = rc.path('g', 'm', 'tasks')
        self.assertIs(first, rc.path('g', 'm', 'tasks'))
        self.assertEqual('/sys/fs/resctrl/g/tasks', rc.path('g', None,
                                                            'tasks'))
        self.assertEqual('/sys/fs/resctrl/g/mon_groups/m/cpus',
                         rc.path('g', 'm', 'cpus'))
        for _ in range(2):
            # Refused every time, remembered never (nor unhashable).
            for group, mon in [('..', None), ('g', 'a/b'), (['g'], None),
                               (b'g', None)]:
                self.assertRaises(exception.InvalidGroupName, rc.path,
                                  group, mon, 'tasks')

    def test_read_text_as_open_gives_it(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        rc = fs.Resctrl(tmp)
        for data in (b'', b'4201\n4202\n', b'L3:0=7ff\r\nMB:0=10\r',
                     b'x' * 200000, '\u00e9t\u00e9\n'.encode()):
            path = os.path.join(tmp, 'f')
            with open(path, 'wb') as f:
                f.write(data)
            with open(path) as f:
                expected = f.read()
            self.assertEqual(expected, rc._read(path))
        self.assertRaises(exception.ResctrlError, rc._read, tmp)


_TRY_LOCK = '''
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)
'''


class TestLock(ResctrlTestCase):

    def setUp(self):
        super().setUp()
        self.rc = self.make('reference')

    def _other_process_can_lock(self):
        return subprocess.call([sys.executable, '-c', _TRY_LOCK,
                                self.tree.root]) == 0

    def test_excludes_other_processes(self):
        self.assertTrue(self._other_process_can_lock())
        with self.rc.lock():
            self.assertFalse(self._other_process_can_lock())
        self.assertTrue(self._other_process_can_lock())

    def test_reentrant(self):
        with self.rc.lock():
            with self.rc.lock():
                self.assertFalse(self._other_process_can_lock())
            # Still held after the inner block.
            self.assertFalse(self._other_process_can_lock())
        self.assertTrue(self._other_process_can_lock())

    def test_released_on_error(self):
        def fail():
            with self.rc.lock():
                raise ValueError('boom')
        self.assertRaises(ValueError, fail)
        self.assertTrue(self._other_process_can_lock())

    def test_excludes_another_instance(self):
        # A second object (another fd, as libvirt has) waits for the first.
        other = fs.Resctrl(self.tree.root)
        order = []

        def contender():
            with other.lock():
                order.append('other')

        with self.rc.lock():
            thread = threading.Thread(target=contender)
            thread.start()
            thread.join(0.2)
            self.assertTrue(thread.is_alive())
            order.append('first')
        thread.join(5)
        self.assertEqual(['first', 'other'], order)

    def test_not_mounted(self):
        rc = fs.Resctrl(os.path.join(tempfile.mkdtemp(), 'absent'))

        def take():
            with rc.lock():
                pass
        self.assertRaises(exception.ResctrlNotMounted, take)
