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

"""Statement coverage of each fuzz target's parser, from a corpus.

    python -m tests.fuzz.measure [--dir 'PATTERN'] [TARGET ...]

Replays the inputs of ``tests/fuzz/corpus/TARGET`` and
``tests/fuzz/crashers/TARGET`` (and of each ``--dir`` pattern, ``{}``
standing for the target) through the target under coverage.py, and prints
how many statements of the target's measured modules and functions ran.
libFuzzer's own ``cov:`` figure counts edges instead; this one says which
share of the parser the corpus exercises.
"""

import argparse
import inspect
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def inputs(dirs):
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if os.path.isfile(path):
                with open(path, 'rb') as f:
                    yield f.read()


def statements(cov, objs):
    """(run, total) statements of the modules and functions ``objs``."""
    run = total = 0
    for obj in objs:
        if isinstance(obj, types.ModuleType):
            path, first, last = obj.__file__, 0, sys.maxsize
        else:
            path = inspect.getsourcefile(obj)
            lines, first = inspect.getsourcelines(obj)
            last = first + len(lines) - 1
        _name, stmts, _excl, missing, _text = cov.analysis2(path)
        mine = [n for n in stmts if first <= n <= last]
        total += len(mine)
        run += len(set(mine) - set(missing))
    return run, total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dir', action='append', default=[],
                        help='more input directories; {} is the target')
    parser.add_argument('targets', nargs='*')
    args = parser.parse_args(argv)

    import coverage
    cov = coverage.Coverage(data_file=None, branch=False)
    cov.start()
    from tests.fuzz import targets as targets_mod
    names = args.targets or list(targets_mod.TARGETS)
    results = []
    for name in names:
        target = targets_mod.TARGETS[name]
        dirs = [os.path.join(HERE, 'corpus', name),
                os.path.join(HERE, 'crashers', name)]
        dirs += [d.replace('{}', name) for d in args.dir]
        count = 0
        for data in inputs(dirs):
            targets_mod.run_one(target, data)
            count += 1
        results.append((name, count, target.measured))
    cov.stop()
    print('%-14s %8s %12s %7s' % ('target', 'inputs', 'statements', 'cover'))
    for name, count, measured in results:
        run, total = statements(cov, measured)
        print('%-14s %8d %5d / %-5d %6.1f%%' % (
            name, count, run, total, 100.0 * run / total if total else 0))


if __name__ == '__main__':
    main()
