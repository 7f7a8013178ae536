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

"""The ``tasks``, ``cpus`` and ``cpus_list`` files."""

import errno

from tests.unit.emulator import fakes

EINVAL = errno.EINVAL


class TasksTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        for path in ('/g1', '/g1/mon_groups/m1', '/g1/mon_groups/m2',
                     '/g2', '/mon_groups/r1'):
            self.tree.mkdir(path)

    def tasks(self, path):
        return [int(t) for t in self.read(path + '/tasks').split()]

    def test_moves(self):
        self.assertEqual([1, 100, 101, 102, 103], self.tasks(''))
        self.write('/g1/tasks', '100')
        self.assertEqual([100], self.tasks('/g1'))
        self.assertEqual([1, 101, 102, 103], self.tasks(''))
        # Into a monitoring group of the same control group.
        self.write('/g1/mon_groups/m1/tasks', '100\n')
        self.assertEqual([100], self.tasks('/g1/mon_groups/m1'))
        self.assertEqual([100], self.tasks('/g1'))
        # Between sibling monitoring groups.
        self.write('/g1/mon_groups/m2/tasks', '100')
        self.assertEqual([], self.tasks('/g1/mon_groups/m1'))
        # Writing to the control group takes it out of its mon group.
        self.write('/g1/tasks', '100')
        self.assertEqual([], self.tasks('/g1/mon_groups/m2'))
        self.assertEqual([100], self.tasks('/g1'))
        self.write('/g1/mon_groups/m1/tasks', '100')
        # Into another control group: out of the old one and its mon group.
        self.write('/g2/tasks', '100')
        self.assertEqual([], self.tasks('/g1'))
        self.assertEqual([], self.tasks('/g1/mon_groups/m1'))
        self.assertEqual([100], self.tasks('/g2'))
        # Back to the root, then into a mon group of the root.
        self.write('/tasks', '100')
        self.write('/mon_groups/r1/tasks', '100')
        self.assertEqual([100], self.tasks('/mon_groups/r1'))
        self.assertIn(100, self.tasks(''))
        self.assertEqual('ok\n', self.status())
        # Repeating a move is a no-op that succeeds.
        self.write('/mon_groups/r1/tasks', '100')

    def test_mon_group_takes_only_parent_tasks(self):
        self.write('/g2/tasks', '101')
        for path, tid in (('/g1/mon_groups/m1', 101),
                          ('/g1/mon_groups/m1', 102),
                          ('/mon_groups/r1', 101)):
            self.assertWriteFails(
                EINVAL, "Can't move task to different control group\n"
                        "Error while processing task %d\n" % tid,
                path + '/tasks', str(tid))
        self.assertEqual([101], self.tasks('/g2'))

    def test_write_formats(self):
        cases = [('100,101', [100, 101]), (' 102 , 103 \n', [102, 103]),
                 ('0144', [100]),           # base 0: octal
                 ('0x65', [101]), ('', []), ('\n', []), ('100,', [100])]
        for data, moved in cases:
            self.write('/tasks', '100,101,102,103')
            self.write('/g1/tasks', data)
            self.assertEqual(moved, self.tasks('/g1'), data)

    def test_failures(self):
        cases = [
            ('999', errno.ESRCH,
             'No task 999\nError while processing task 999\n'),
            ('abc', EINVAL, 'Task list parsing error pid abc\n'),
            ('1 2', EINVAL, 'Task list parsing error pid 1 2\n'),
            ('100;101', EINVAL, 'Task list parsing error pid 100;101\n'),
            ('-3', EINVAL, 'Invalid pid -3\n'),
        ]
        for data, err, status in cases:
            self.assertWriteFails(err, status, '/g1/tasks', data)
        self.assertEqual([], self.tasks('/g1'))

    def test_multi_write_stops_at_first_failure(self):
        self.assertWriteFails(
            errno.ESRCH, 'No task 999\nError while processing task 999\n',
            '/g1/tasks', '100,101,999,102')
        self.assertEqual([100, 101], self.tasks('/g1'))

    def test_pid_zero_is_the_writer(self):
        self.write('/g1/tasks', '0', pid=103)
        self.assertEqual([103], self.tasks('/g1'))

    def test_permission(self):
        self.threads.add(200, uid=1000)
        self.write('/g1/tasks', '200', uid=1000)
        self.assertWriteFails(
            errno.EPERM, 'No permission to move task 100\n'
                         'Error while processing task 100\n',
            '/g1/tasks', '100', uid=1000)
        self.assertEqual([200], self.tasks('/g1'))

    def test_exited_threads_vanish(self):
        self.write('/g1/tasks', '100,101')
        self.threads.exit(101)
        self.assertEqual([100], self.tasks('/g1'))
        self.assertNotIn(101, self.tasks(''))
        self.assertWriteFails(errno.ESRCH, 'No task 101\n'
                              'Error while processing task 101\n',
                              '/g2/tasks', '101')
        # A new thread that reuses the number is not in g1.
        self.threads.add(101)
        self.assertEqual([100], self.tasks('/g1'))

    def test_new_threads_inherit(self):
        self.write('/g1/tasks', '100')
        self.write('/g1/mon_groups/m1/tasks', '100')
        self.threads.add(200, tgid=100)      # a thread of process 100
        self.threads.add(300, ppid=100)      # a child process of 100
        self.threads.add(400, ppid=1)        # a child of init
        self.assertEqual([100, 200, 300], self.tasks('/g1/mon_groups/m1'))
        self.assertIn(400, self.tasks(''))
        # Moves after the first sighting are independent.
        self.write('/g2/tasks', '100')
        self.assertEqual([200, 300], self.tasks('/g1'))
        # First seen by a write: it inherited g2, so r1 refuses it.
        self.threads.add(500, tgid=100)
        self.assertWriteFails(
            EINVAL, "Can't move task to different control group\n"
                    "Error while processing task 500\n",
            '/mon_groups/r1/tasks', '500')
        self.assertEqual([100, 500], self.tasks('/g2'))

    def test_no_creator_search_where_no_parent_is_in_a_group(self):
        self.write('/g1/tasks', '100')
        asked = []
        real = self.threads.creator
        self.threads.creator = lambda tid, tgid: (asked.append(tid) or
                                                  real(tid, tgid))
        self.threads.add(300, ppid=101)     # forked by the default group
        self.threads.add(301, ppid=100)     # forked by g1
        self.assertEqual([100, 301], self.tasks('/g1'))
        self.assertEqual([301], asked)

    def test_creator_thread_decides(self):
        # Thread 101 of process 100 sits in g2, the leader in g1.
        self.threads.add(101, tgid=100)
        self.write('/g1/tasks', '100')
        self.write('/g2/tasks', '101')
        self.threads.add(600, tgid=100, creator=101)   # made by 101
        self.threads.add(700, ppid=100, creator=101)   # forked by 101
        self.threads.add(800, ppid=100, creator=100)   # forked by 100
        self.assertEqual([101, 600, 700], self.tasks('/g2'))
        self.assertEqual([100, 800], self.tasks('/g1'))
        # A creator in the default group: so is the new thread.
        self.write('/tasks', '101')
        self.threads.add(900, tgid=100, creator=101)
        self.assertIn(900, self.tasks(''))


class CpusTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        for path in ('/g1', '/g1/mon_groups/m1', '/g1/mon_groups/m2',
                     '/g2'):
            self.tree.mkdir(path)

    def test_initial(self):
        self.assertEqual('3\n', self.read('/cpus'))
        self.assertEqual('0-1\n', self.read('/cpus_list'))
        self.assertEqual('0\n', self.read('/g1/cpus'))
        self.assertEqual('\n', self.read('/g1/cpus_list'))

    def test_ctrl_groups(self):
        self.write('/g1/cpus', '2\n')
        self.assertEqual(('1\n', '1\n'),
                         (self.read('/g1/cpus_list'), self.read('/cpus')))
        self.assertWriteFails(EINVAL, "Can't drop CPUs from default group\n",
                              '/cpus_list', '')
        # g2 takes CPU 1 from g1 and from g1's monitoring groups.
        self.write('/g1/mon_groups/m1/cpus_list', '1')
        self.write('/g2/cpus_list', '1')
        self.assertEqual(('\n', '\n', '1\n'), (
            self.read('/g1/cpus_list'),
            self.read('/g1/mon_groups/m1/cpus_list'),
            self.read('/g2/cpus_list')))
        # Dropped CPUs go back to the root.
        self.write('/g2/cpus', '0')
        self.assertEqual('0-1\n', self.read('/cpus_list'))
        # The root takes CPUs back by writing them.
        self.write('/g1/cpus_list', '0-1')
        self.write('/cpus_list', '0')
        self.assertEqual(('0\n', '1\n'),
                         (self.read('/cpus_list'), self.read('/g1/cpus_list')))

    def test_ctrl_write_clears_mon_groups(self):
        self.write('/g1/cpus_list', '0-1')
        self.write('/g1/mon_groups/m1/cpus_list', '0')
        self.write('/g1/cpus_list', '0-1')
        self.assertEqual('\n', self.read('/g1/mon_groups/m1/cpus_list'))

    def test_mon_groups(self):
        self.assertWriteFails(
            EINVAL, 'Can only add CPUs to mongroup that belong to parent\n',
            '/g1/mon_groups/m1/cpus_list', '1')
        self.write('/g1/cpus_list', '0-1')
        self.write('/g1/mon_groups/m1/cpus_list', '0-1')
        self.write('/g1/mon_groups/m2/cpus', '2')
        self.assertEqual(('0\n', '1\n', '0-1\n'), (
            self.read('/g1/mon_groups/m1/cpus_list'),
            self.read('/g1/mon_groups/m2/cpus_list'),
            self.read('/g1/cpus_list')))
        # Dropping a CPU from a mon group leaves it with the parent.
        self.write('/g1/mon_groups/m2/cpus_list', '')
        self.assertEqual('0-1\n', self.read('/g1/cpus_list'))

    def test_bad_input(self):
        cases = [('/g1/cpus', '4', errno.EOVERFLOW),
                 ('/g1/cpus', 'x', EINVAL),
                 ('/g1/cpus_list', '0-2', errno.ERANGE),
                 ('/g1/cpus_list', '1-0', EINVAL)]
        for path, data, err in cases:
            self.assertWriteFails(err, 'Bad CPU list/mask\n', path, data)

    def test_offline_cpus(self):
        model = self.make_model('reference', online_cpus=(0, 1),
                                nr_cpu_ids=4)
        self.model, self.tree = model, fakes.tree.ResctrlTree(model)
        self.tree.mkdir('/g1')
        self.assertEqual('3\n', self.read('/cpus'))
        self.assertWriteFails(EINVAL, 'Can only assign online CPUs\n',
                              '/g1/cpus_list', '2')
        self.assertWriteFails(EINVAL, 'Can only assign online CPUs\n',
                              '/g1/cpus', '4')
