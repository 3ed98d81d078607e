//! A simulated file: its live bytes written and read, made durable by its own sync.

use super::CrashFs;
use crate::store::fs::FsFile;
use std::io;

/// One file of the simulated disk, by its inode.
pub(super) struct CrashFile {
    pub(super) fs: CrashFs,
    pub(super) ino: u64,
}

impl FsFile for CrashFile {
    /// Simulated files have no modes.
    fn restrict_to_owner(&self) -> io::Result<()> {
        Ok(())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        st.inode(self.ino).live.extend_from_slice(buf);
        Ok(())
    }

    /// Only the live bytes change: a power loss before the next sync keeps the old ones.
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        let live = &mut st.inode(self.ino).live;
        crate::store::within_written(offset, buf.len(), live.len() as u64)?;
        live[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.powered()?;
        let data = &st.inode(self.ino).live;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        if end > data.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&data[start..end]);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.fs.lock();
        st.powered()?;
        Ok(st.inode(self.ino).live.len() as u64)
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        if !st.opts.skip_file_sync {
            let inode = st.inode(self.ino);
            inode.durable = inode.live.clone();
        }
        Ok(())
    }
}
