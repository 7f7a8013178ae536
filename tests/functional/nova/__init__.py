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

# Nova's harness runs under eventlet, which must patch the process before
# oslo.db is imported: oslo.db's per-thread transaction context is
# otherwise a real thread's, shared by every green thread, and two of them
# meet in one transaction ("Can't upgrade a READER transaction to a WRITER
# mid-transaction": the live migration monitor, a delete run as a call).
# Nova's own test packages patch first, each release in its own place:
# Nova 31 on importing nova.monkey_patch, Nova 32 on importing nova.test
# (after it imported nothing of oslo.db), Nova 33 and 34 in
# nova.tests.functional, after nova.test has imported oslo.db. So patch
# here, before anything of Nova's: nova.monkey_patch.patch() (Nova 32 and
# later; it honours OS_NOVA_DISABLE_EVENTLET_PATCHING, as the threading
# target needs), or the import itself on Nova 31.
import nova.monkey_patch

if hasattr(nova.monkey_patch, 'patch'):  # Nova 32 onwards; remove with 31.
    nova.monkey_patch.patch()
