# Holds a SQLite file's write lock (BEGIN IMMEDIATE) for a while, as another process
# writing to the same store would: prints LOCKED once it holds it, releases after the
# given milliseconds. With "probe" instead of a time: prints FREE if the write lock can
# be taken at once (and releases it), BUSY if another process holds it.
#   python3 lock-holder.py <db> <ms|probe>
import sqlite3, sys, time
db, arg = sys.argv[1], sys.argv[2]
if arg == 'probe':
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute('BEGIN IMMEDIATE')
        conn.execute('ROLLBACK')
        print('FREE', flush=True)
    except sqlite3.OperationalError:
        print('BUSY', flush=True)
    conn.close()
    sys.exit(0)
conn = sqlite3.connect(db, timeout=10, isolation_level=None)
conn.execute('BEGIN IMMEDIATE')
print('LOCKED', flush=True)
time.sleep(int(arg) / 1000)
conn.execute('COMMIT')
conn.close()
