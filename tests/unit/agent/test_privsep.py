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

"""The privileged entrypoints refuse anything outside their narrow job."""

import os
from unittest import mock

import fixtures

from rdt_virt import exception
from rdt_virt import privsep
from rdt_virt.privsep import resctrl as priv
from rdt_virt.resctrl import fs
from tests import base

LIBVIRT = 'qemu-3-instance-00000003-vcpus_0-1'


class PrivsepTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        privsep.sys_admin_pctxt.set_client_mode(False)
        self.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)
        self.root = self.useFixture(fixtures.TempDir()).path
        for path in ('info', 'mon_groups'):
            os.mkdir(os.path.join(self.root, path))
        for name in ('schemata', 'tasks'):
            open(os.path.join(self.root, name), 'w').close()
        self.flags(resctrl_root=self.root, group='rdt')


class TestValidation(PrivsepTestCase):

    def assertRefused(self, func, *args):
        self.assertRaises(ValueError, func, *args)

    def test_path_traversal_refused(self):
        for name in ('../etc', 'rdtvirt-../../x', '/etc/passwd',
                     'rdtvirt-a/b', '..', '.', '', 'info', 'mon_groups',
                     'rdtvirt-x\n'):
            self.assertRefused(priv.create_group, name)
            self.assertRefused(priv.write_schemata, name, 'MB:0=10\n')
            self.assertRefused(priv.assign_tasks, name, None, [1])
            self.assertRefused(priv.create_mon_group, None, name)

    def test_foreign_names_refused(self):
        for name in ('pqos-batch', 'COS1', 'rdtvirtx'):
            self.assertRefused(priv.create_group, name)
            self.assertRefused(priv.remove_group, name)
            self.assertRefused(priv.write_schemata, name, 'MB:0=10\n')
            self.assertRefused(priv.assign_tasks, name, None, [1])
            self.assertRefused(priv.create_mon_group, None, name)
            self.assertRefused(priv.remove_mon_group, None, name)

    def test_libvirt_groups_may_be_restored_never_removed(self):
        self.assertTrue(priv.create_group(LIBVIRT)['ok'])
        self.assertRefused(priv.remove_group, LIBVIRT)
        # Monitoring groups are always rdt-virt's own.
        self.assertRefused(priv.create_mon_group, None, LIBVIRT)

    def test_default_group_only_where_it_makes_sense(self):
        self.assertRefused(priv.create_group, None)
        self.assertRefused(priv.remove_group, None)
        self.assertTrue(priv.write_schemata(None, 'L3:0=f\n')['ok'])
        with open(os.path.join(self.root, 'schemata')) as f:
            self.assertEqual('L3:0=f\n', f.read())

    def test_thread_ids_checked(self):
        for tids in ([0], [-1], ['12'], [1.5], [True], [2 ** 22 + 1],
                     '1,2', None, list(range(1, 70000))):
            self.assertRefused(priv.assign_tasks, None, None, tids)

    def test_counter_assignment_checked(self):
        total = 'mbm_total_bytes'
        for args in (('rdtvirt-mb10', None, 'llc_occupancy', 'e'),
                     ('rdtvirt-mb10', None, total, 'x'),
                     (None, None, total, '_'),
                     ('pqos-1', None, total, 'e'),
                     ('rdtvirt-mb10', '../x', total, 'e'),
                     (None, 'collectd-1', total, 'e')):
            self.assertRefused(priv.assign_counter, *args)

    def test_schemata_checked(self):
        for text in ('', 'garbage', 'L3:0=zz\n', 'MB:x=1\n',
                     'L3:0=f\n' * 3000, b'MB:0=10\n', 'mb:0=10\n'):
            self.assertRefused(priv.write_schemata, 'rdtvirt-mb10', text)

    def test_symlink_out_of_the_root_refused(self):
        outside = self.useFixture(fixtures.TempDir()).path
        os.symlink(outside, os.path.join(self.root, 'rdtvirt-mb10'))
        self.assertRefused(priv.write_schemata, 'rdtvirt-mb10', 'MB:0=1\n')
        self.assertRefused(priv.remove_group, 'rdtvirt-mb10')
        self.assertFalse(os.path.exists(os.path.join(outside, 'schemata')))

    def test_prefix_comes_from_configuration(self):
        self.flags(group_prefix='other-', group='rdt')
        self.assertRefused(priv.create_group, 'rdtvirt-mb10')
        self.assertTrue(priv.create_group('other-mb10')['ok'])


class TestBeneath(PrivsepTestCase):
    """Checked as realpath() resolves them, changed where checked."""

    def setUp(self):
        super().setUp()
        self.outside = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.outside, 'mon_groups', 'm'))
        group = os.path.join(self.root, 'rdtvirt-mb10')
        os.makedirs(os.path.join(group, 'mon_groups', 'rdtvirt-m-1'))
        open(os.path.join(group, 'tasks'), 'w').close()
        links = {
            'rdtvirt-out': self.outside,              # out of the root
            'rdtvirt-in': group,                      # to inside it
            'rdtvirt-dangling': os.path.join(self.root, 'nowhere'),
            'rdtvirt-loop': os.path.join(self.root, 'rdtvirt-loop'),
            'rdtvirt-mb10/mon_groups/rdtvirt-m-2': self.outside,
            'rdtvirt-mb10/schemata': os.path.join(self.outside, 'x'),
        }
        for name, target in links.items():
            os.symlink(target, os.path.join(self.root, name))

    def test_the_check_is_realpaths(self):
        real_root = os.path.realpath(self.root)
        for rel in ('', 'tasks', 'rdtvirt-mb10', 'rdtvirt-mb10/tasks',
                    'rdtvirt-mb10/schemata', 'rdtvirt-mb10/mon_groups',
                    'rdtvirt-mb10/mon_groups/rdtvirt-m-1/tasks',
                    'rdtvirt-mb10/mon_groups/rdtvirt-m-2/tasks',
                    'rdtvirt-mb10/mon_groups/rdtvirt-m-3',
                    'rdtvirt-mb10/tasks/x', 'rdtvirt-new', 'rdtvirt-new/x/y',
                    'rdtvirt-out', 'rdtvirt-out/mon_groups/m/tasks',
                    'rdtvirt-in/tasks', 'rdtvirt-dangling/tasks',
                    'rdtvirt-loop/tasks', '../x', 'rdtvirt-mb10/../..',
                    'rdtvirt-mb10/./tasks', self.outside, '/'):
            path = os.path.join(self.root, rel)
            real = os.path.realpath(path)
            if real != real_root and not real.startswith(real_root + '/'):
                self.assertRaises(ValueError, priv.beneath, self.root, path)
                continue
            fd, name = priv.beneath(self.root, path)
            if fd is None:
                self.assertEqual(path, name, rel)
                continue
            # The directory the name is in, reached without a link.
            self.addCleanup(os.close, fd)
            self.assertEqual(os.path.dirname(real),
                             os.readlink('/proc/self/fd/%d' % fd), rel)
            self.assertEqual(os.path.basename(real), name, rel)

    def test_names_are_looked_up_once(self):
        # realpath() stats every prefix from "/": a lookup of each name
        # for every deeper one. Below the root, without links, it is not
        # needed at all.
        path = os.path.join(self.root, 'rdtvirt-mb10', 'mon_groups',
                            'rdtvirt-m-1', 'tasks')
        real = os.path.realpath

        def root_only(p):
            self.assertEqual(self.root, p)
            return real(p)
        with mock.patch.object(os.path, 'realpath', side_effect=root_only):
            fd, name = priv.beneath(self.root, path)
        os.close(fd)
        self.assertEqual('tasks', name)

    def test_the_change_is_where_the_check_was(self):
        # The group is swapped for a link out of the root after the
        # check: the write still goes to the directory that was checked.
        group = os.path.join(self.root, 'rdtvirt-mb10')
        fd, name = priv.beneath(self.root, os.path.join(group, 'tasks'))
        self.addCleanup(os.close, fd)
        os.rename(group, group + '-old')
        os.symlink(self.outside, group)
        out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b'1\n')
        os.close(out)
        with open(os.path.join(group + '-old', 'tasks')) as f:
            self.assertEqual('1\n', f.read())
        self.assertFalse(os.path.exists(os.path.join(self.outside,
                                                     'tasks')))

    def test_links_out_of_the_root_refused(self):
        for group, mon in (('rdtvirt-out', None), ('rdtvirt-mb10',
                                                   'rdtvirt-m-2')):
            self.assertRaises(ValueError, priv.assign_tasks, group, mon,
                              [1])
        self.assertEqual(priv.E_NOTFOUND,
                         priv.assign_tasks('rdtvirt-dangling', None,
                                           [1])['error'])
        # A link inside the root is followed, as before.
        schemata = os.path.join(self.root, 'rdtvirt-mb10', 'schemata')
        os.unlink(schemata)
        open(schemata, 'w').close()
        self.assertTrue(priv.write_schemata('rdtvirt-in',
                                            'MB:0=10\n')['ok'])
        with open(schemata) as f:
            self.assertEqual('MB:0=10\n', f.read())


def tree(root):
    """Every path below root with its kind and content, to compare."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            found[path] = 'link' if os.path.islink(path) else 'dir'
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                found[path] = f.read()
    return found


class TestAudit(PrivsepTestCase):
    """Every entrypoint refuses bad arguments and changes nothing.

    Wrong types, oversize values and paths that escape the root raise
    ValueError for every argument of every entrypoint.
    """

    GROUP = 'rdtvirt-mb10'
    MON = 'rdtvirt-m-1'
    # Valid arguments of each entrypoint.
    CALLS = {
        'create_group': (GROUP,),
        'remove_group': (GROUP,),
        'create_mon_group': (GROUP, MON),
        'remove_mon_group': (GROUP, MON),
        'move_mon_group': (MON, GROUP, None),
        'write_schemata': (GROUP, 'MB:0=10\n'),
        'assign_tasks': (GROUP, MON, [1]),
    }
    BAD_NAMES = (5, 1.0, b'rdtvirt-mb10', ['rdtvirt-mb10'],
                 {'rdtvirt-mb10': 1}, True, 'rdtvirt-' + 'x' * 248,
                 'rdtvirt-\x00', 'rdtvirt-\u00e9', 'rdtvirt-a b',
                 'rdtvirt-x\n', 'rdtvirt-../x')
    BAD_SCHEMATA = (5, None, ['MB:0=10'], b'MB:0=10\n',
                    'MB:0=10\n' + ' ' * 8200,
                    # Python splits lines where the kernel does not.
                    'MB:0=10\x1cL3:0=f\n', 'MB:0=10\x85L3:0=f\n',
                    'MB:0=10\u2028L3:0=f\n',
                    # Resource names of ASCII capitals and digits only.
                    '\u00c4B:0=1\n', 'M\u0392:0=10\n', 'MB:0=10\x00\n')
    BAD_TIDS = (1, '1', None, {1: 1}, [None], [b'1'], [2 ** 64],
                list(range(1, priv.MAX_TIDS + 2)))

    def setUp(self):
        super().setUp()
        # What the kernel would show after mkdir of the group and of its
        # monitoring group (a plain directory does not make these).
        group = os.path.join(self.root, self.GROUP)
        os.makedirs(os.path.join(group, 'mon_groups', self.MON))
        for path in ('schemata', 'tasks', 'mon_groups/%s/tasks' % self.MON):
            open(os.path.join(group, path), 'w').close()

    def assertRefusedUnchanged(self, name, args):
        before = tree(self.root)
        self.assertRaises(ValueError, getattr(priv, name), *args)
        self.assertEqual(before, tree(self.root), (name, args))

    def test_group_name_arguments(self):
        count = 0
        for name, args in self.CALLS.items():
            for i, arg in enumerate(args):
                if not isinstance(arg, str):
                    continue
                for bad in self.BAD_NAMES:
                    self.assertRefusedUnchanged(
                        name, args[:i] + (bad,) + args[i + 1:])
                    count += 1
        self.assertEqual(12 * len(self.BAD_NAMES), count)

    def test_schemata_argument(self):
        for bad in self.BAD_SCHEMATA:
            self.assertRefusedUnchanged('write_schemata', (self.GROUP, bad))

    def test_thread_id_argument(self):
        for bad in self.BAD_TIDS:
            self.assertRefusedUnchanged('assign_tasks',
                                        (self.GROUP, self.MON, bad))

    def test_symlinked_group_refused(self):
        outside = self.useFixture(fixtures.TempDir()).path
        for d in ('mon_groups', os.path.join('mon_groups', self.MON)):
            os.mkdir(os.path.join(outside, d))
        os.symlink(outside, os.path.join(self.root, 'rdtvirt-link'))
        before = tree(outside)
        for name, args in self.CALLS.items():
            for i, arg in enumerate(args):
                if arg == self.GROUP:
                    self.assertRefusedUnchanged(
                        name, args[:i] + ('rdtvirt-link',) + args[i + 1:])
        self.assertEqual(before, tree(outside))

    def test_symlinked_mon_groups_refused(self):
        # A group whose mon_groups directory leads out of the root.
        outside = self.useFixture(fixtures.TempDir()).path
        os.mkdir(os.path.join(outside, self.MON))
        group = os.path.join(self.root, 'rdtvirt-mb20')
        os.mkdir(group)
        os.symlink(outside, os.path.join(group, 'mon_groups'))
        before = tree(outside)
        for name, args in (
                ('create_mon_group', ('rdtvirt-mb20', 'rdtvirt-m-2')),
                ('remove_mon_group', ('rdtvirt-mb20', self.MON)),
                ('move_mon_group', (self.MON, self.GROUP, 'rdtvirt-mb20')),
                ('assign_tasks', ('rdtvirt-mb20', self.MON, [1]))):
            self.assertRefusedUnchanged(name, args)
        self.assertEqual(before, tree(outside))

    def test_symlinked_file_refused(self):
        outside = self.useFixture(fixtures.TempDir()).path
        target = os.path.join(outside, 'victim')
        with open(target, 'w') as f:
            f.write('kept\n')
        group = os.path.join(self.root, self.GROUP)
        for name in ('schemata', 'tasks'):
            path = os.path.join(group, name)
            if os.path.exists(path):
                os.unlink(path)
            os.symlink(target, path)
        self.assertRefusedUnchanged('write_schemata',
                                    (self.GROUP, 'MB:0=10\n'))
        self.assertRefusedUnchanged('assign_tasks', (self.GROUP, None, [1]))
        with open(target) as f:
            self.assertEqual('kept\n', f.read())

    def test_valid_calls_still_work(self):
        self.assertTrue(priv.write_schemata(self.GROUP, 'MB:0=10\n')['ok'])
        self.assertTrue(priv.create_mon_group(self.GROUP,
                                              'rdtvirt-m-2')['ok'])
        self.assertTrue(priv.remove_mon_group(self.GROUP,
                                              'rdtvirt-m-2')['ok'])


class TestResults(PrivsepTestCase):

    def test_create_and_remove(self):
        self.assertEqual(priv.OK, priv.create_group('rdtvirt-mb10'))
        self.assertTrue(os.path.isdir(os.path.join(self.root,
                                                   'rdtvirt-mb10')))
        result = priv.create_group('rdtvirt-mb10')
        self.assertEqual(priv.E_EXISTS, result['error'])
        self.assertEqual(priv.OK, priv.remove_group('rdtvirt-mb10'))
        self.assertEqual(priv.E_NOTFOUND,
                         priv.remove_group('rdtvirt-mb10')['error'])

    def test_missing_group_is_a_result_not_an_exception(self):
        result = priv.assign_tasks('rdtvirt-mb10', None, [1])
        self.assertFalse(result['ok'])
        self.assertEqual(priv.E_NOTFOUND, result['error'])
        self.assertEqual([], result['moved'])

    def test_not_mounted(self):
        self.flags(resctrl_root=os.path.join(self.root, 'nowhere'),
                   group='rdt')
        result = priv.write_schemata(None, 'MB:0=10\n')
        self.assertEqual(priv.E_NOTMOUNTED, result['error'])


class TestRename(PrivsepTestCase):

    def test_rename_refused_by_an_old_kernel_has_its_own_code(self):
        for path in ('rdtvirt-mb10/mon_groups/rdtvirt-m-1', 'rdtvirt-mb20'):
            os.makedirs(os.path.join(self.root, path))
        with mock.patch.object(fs.os, 'rename',
                               side_effect=PermissionError(1, 'x')):
            result = priv.move_mon_group('rdtvirt-m-1', 'rdtvirt-mb10',
                                         'rdtvirt-mb20')
        self.assertEqual(priv.E_NORENAME, result['error'])


class TestMultipleThreadsPerWrite(PrivsepTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            priv, '_MULTI_TID', {'supported': None}))
        os.mkdir(os.path.join(self.root, 'rdtvirt-mb10'))
        self.tasks = os.path.join(self.root, 'rdtvirt-mb10', 'tasks')
        open(self.tasks, 'w').close()

    def test_one_write_when_the_kernel_takes_a_list(self):
        result = priv.assign_tasks('rdtvirt-mb10', None, [11, 12, 13])
        self.assertEqual(([11, 12, 13], []), (result['moved'],
                                              result['gone']))
        with open(self.tasks) as f:
            self.assertEqual('11,12,13', f.read())
        self.assertTrue(priv._MULTI_TID['supported'])

    def test_old_kernel_falls_back_to_one_write_per_thread(self):
        refused = exception.ResctrlWriteError(self.tasks, '11,12', 22,
                                              'Invalid argument', 'ok')
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once',
                               side_effect=refused):
            result = priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertEqual([11, 12], result['moved'])
        self.assertFalse(priv._MULTI_TID['supported'])
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once') as once:
            priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertFalse(once.called)

    def test_a_too_long_list_does_not_disable_lists(self):
        too_big = exception.ResctrlWriteError(self.tasks, '11,12', 7,
                                              'Argument list too long', '')
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once',
                               side_effect=too_big):
            result = priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertEqual([11, 12], result['moved'])
        self.assertIsNot(False, priv._MULTI_TID['supported'])
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once') as once:
            priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertTrue(once.called)

    def test_long_lists_split_below_a_page(self):
        tids = list(range(1000000, 1002000))
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once') as once:
            result = priv.assign_tasks('rdtvirt-mb10', None, tids)
        self.assertEqual(tids, result['moved'])
        written = [c[0][0] for c in once.call_args_list]
        self.assertGreater(len(written), 1)
        self.assertEqual(tids, [t for chunk in written for t in chunk])
        for chunk in written:
            self.assertLess(len(','.join(map(str, chunk))), 4096)

    def test_a_passing_error_keeps_the_list(self):
        # An EIO the kernel gave for one write says nothing about lists:
        # the next call must still try one write.
        failed = exception.ResctrlWriteError(self.tasks, '11,12', 5,
                                             'Input/output error', 'ok')
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once',
                               side_effect=failed):
            result = priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertEqual([11, 12], result['moved'])
        self.assertIsNone(priv._MULTI_TID['supported'])
        with mock.patch.object(fs.Resctrl, 'add_tasks_at_once') as once:
            priv.assign_tasks('rdtvirt-mb10', None, [11, 12])
        self.assertTrue(once.called)
