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

# Nova 32 (2025.2) monkey-patches the test process for eventlet when
# nova.test is imported. This package's modules import nova.context, and
# with it oslo.db, first: oslo.db's per-thread transaction context then
# stayed a real thread's, shared by every green thread, and the live
# migration monitor met the migration's own database read ("Can't upgrade
# a READER transaction to a WRITER mid-transaction"). Import nova.test
# first, as Nova's own tests do. Remove with 2025.2.
import nova.test  # noqa: F401
