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

"""What the FUSE operations leave to the kernel."""

from tests import base


class FuseOperationsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            from rdt_virt.emulator import fusefs
        except (ImportError, OSError) as e:
            self.skipTest('mfusepy/libfuse3 unavailable: %s' % e)
        import mfusepy
        self.fusefs = fusefs
        self.mfusepy = mfusepy

    def test_close_is_not_a_round_trip(self):
        # mfusepy registers no handler for a method left as the base
        # class's: libfuse answers FLUSH with ENOSYS and the kernel stops
        # sending it, as kernfs has no flush either.
        self.assertIs(self.mfusepy.Operations.flush,
                      self.fusefs.ResctrlOperations.flush)
        self.assertTrue(getattr(self.fusefs.ResctrlOperations.flush,
                                'libfuse_ignore', False))

    def test_names_looked_up_at_each_use_attributes_kept_a_while(self):
        # Directories appear and vanish at once; a lookup brings the
        # attributes, which spare the GETATTR of each directory walked.
        options = self.fusefs.MOUNT_OPTIONS
        self.assertEqual(0, options['entry_timeout'])
        self.assertEqual(0, options['negative_timeout'])
        self.assertTrue(0 < options['attr_timeout'] <= 1)
