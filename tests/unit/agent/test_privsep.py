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
