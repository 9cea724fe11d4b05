# Holds a SQLite file's write lock (BEGIN IMMEDIATE) for a while, as another process
# writing to the same store would: prints LOCKED once it holds it, releases after
# the given milliseconds.  python3 lock-holder.py <db> <ms>
import sqlite3, sys, time
db, ms = sys.argv[1], int(sys.argv[2])
conn = sqlite3.connect(db, timeout=10, isolation_level=None)
conn.execute('BEGIN IMMEDIATE')
print('LOCKED', flush=True)
time.sleep(ms / 1000)
conn.execute('COMMIT')
conn.close()
