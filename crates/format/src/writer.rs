//! Builds the metadata of a version file around page data that the caller streams itself.
//! Pure: produces byte vectors, performs no I/O.

use crate::layout::{
    Codec, CommitStats, Footer, Frame, Header, Kind, RegionEntry, Run, FOOTER_LEN, FORMAT_VERSION,
    FRAME_ENTRY_LEN, STATS_LEN,
};

/// The layout of one version file while it is being written: header and region table first,
/// then page data in flush order, then the index, the page-CRC table, the frame table, the
/// commit stats and the footer. Pages are pushed with [`push_page`](Self::push_page); a
/// writer that stores them other than raw also pushes the frames that say how
/// ([`push_frame`](Self::push_frame)).
#[derive(Debug)]
pub struct VersionLayout {
    header: Header,
    regions: Vec<RegionEntry>,
    runs: Vec<Run>,
    crcs: Vec<u32>,
    frames: Vec<Frame>,
    /// Where the pages pushed so far end, as the run index addresses them (stored raw).
    pages_end: u64,
    /// Where the frames pushed so far end in the file.
    data_end: u64,
    stats: CommitStats,
}

/// What the header of a new version says about it; the rest follows from its regions.
#[derive(Debug, Clone, Copy)]
pub struct NewVersion {
    pub kind: Kind,
    pub page_size: u32,
    pub version: u64,
    /// 0 for a full version.
    pub parent: u64,
    pub chain_depth: u32,
    /// The parent file's `meta_crc`; 0 for a full version.
    pub parent_meta_crc: u32,
    pub store_id: [u8; 16],
    pub created_unix_ns: u64,
    /// The application's value for the version (format 5); 0 when none was given.
    pub tag: u64,
}

impl VersionLayout {
    pub fn new(v: NewVersion, regions: Vec<RegionEntry>) -> Self {
        let region_count = u32::try_from(regions.len()).expect("fewer than 2^32 regions");
        let data_offset = Header::data_offset_for(FORMAT_VERSION, region_count, v.page_size);
        VersionLayout {
            header: Header {
                format_version: FORMAT_VERSION,
                kind: v.kind,
                page_size: v.page_size,
                version: v.version,
                parent: v.parent,
                chain_depth: v.chain_depth,
                region_count,
                created_unix_ns: v.created_unix_ns,
                data_offset,
                store_id: Some(v.store_id),
                parent_meta_crc: v.parent_meta_crc,
                tag: v.tag,
            },
            regions,
            runs: Vec::new(),
            crcs: Vec::new(),
            frames: Vec::new(),
            pages_end: data_offset,
            data_end: data_offset,
            stats: CommitStats::default(),
        }
    }

    /// The commit stats [`trailer`](Self::trailer) writes; set them once the last page is
    /// pushed, since they time the commit up to that point.
    pub fn set_stats(&mut self, s: CommitStats) {
        self.stats = s;
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Header, region table and zero padding up to the first page of data.
    pub fn prefix(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.header.data_offset as usize);
        b.extend_from_slice(&self.header.encode());
        for r in &self.regions {
            b.extend_from_slice(&r.encode());
        }
        b.resize(self.header.data_offset as usize, 0);
        b
    }

    /// Record that the next page written to the data section is `page` of region
    /// `region_index`, with CRC `crc`. Consecutive pages of a region join one run.
    pub fn push_page(&mut self, region_index: u32, page: u64, crc: u32) {
        match self.runs.last_mut() {
            Some(run)
                if run.region_index == region_index
                    && run.first_page + run.page_count as u64 == page
                    && run.page_count < u32::MAX =>
            {
                run.page_count += 1;
            }
            _ => self.runs.push(Run {
                region_index,
                page_count: 1,
                first_page: page,
                data_offset: self.pages_end,
            }),
        }
        self.crcs.push(crc);
        self.pages_end += self.header.page_size as u64;
    }

    /// The CRC of the `index`-th page pushed, once its bytes were written again (a pre-copied
    /// page copied again into its place).
    pub fn set_page_crc(&mut self, index: usize, crc: u32) {
        self.crcs[index] = crc;
    }

    /// Record that the next `frame.stored_len` bytes written to the data section store the
    /// next `frame.page_count` pages pushed (frames follow the pages in order). A file whose
    /// frames are all raw is written without a frame table.
    pub fn push_frame(&mut self, frame: Frame) {
        self.frames.push(frame);
        self.data_end += frame.stored_len as u64;
    }

    /// Room for `pages` more pages, so that pushing them (and their frames) never allocates.
    pub fn reserve(&mut self, pages: usize) {
        self.crcs.reserve(pages);
        self.runs.reserve(pages);
        self.frames.reserve(pages);
    }

    pub fn page_count(&self) -> u64 {
        self.crcs.len() as u64
    }

    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Index, page-CRC table, commit stats and footer: what follows the last page of data.
    /// Its last four bytes are the file's `meta_crc`, which a child version records
    /// ([`meta_crc_of_trailer`](Self::meta_crc_of_trailer)).
    pub fn trailer(&self) -> Vec<u8> {
        let framed = self.frames.iter().any(|f| f.codec != Codec::Raw);
        let frames = if framed { &self.frames[..] } else { &[] };
        let index_offset = if self.frames.is_empty() {
            self.pages_end
        } else {
            debug_assert_eq!(
                self.frames.iter().map(|f| f.page_count as u64).sum::<u64>(),
                self.page_count(),
                "frames cover the pages pushed"
            );
            self.data_end
        };
        let mut b = Vec::with_capacity(
            self.runs.len() * crate::RUN_ENTRY_LEN
                + self.crcs.len() * 4
                + frames.len() * FRAME_ENTRY_LEN
                + STATS_LEN
                + FOOTER_LEN,
        );
        for run in &self.runs {
            b.extend_from_slice(&run.encode());
        }
        for c in &self.crcs {
            b.extend_from_slice(&c.to_le_bytes());
        }
        for f in frames {
            b.extend_from_slice(&f.encode());
        }
        b.extend_from_slice(&self.stats.encode());
        let file_length = index_offset + b.len() as u64 + FOOTER_LEN as u64;
        let footer = Footer {
            index_offset,
            run_count: self.runs.len() as u64,
            page_count: self.crcs.len() as u64,
            file_length,
            frame_count: frames.len() as u64,
            meta_crc: 0,
        };
        b.extend_from_slice(&footer.encode_without_crc());
        let meta_crc = crate::crc_append(crate::crc(&self.prefix()), &b);
        b.extend_from_slice(&meta_crc.to_le_bytes());
        debug_assert_eq!(index_offset + b.len() as u64, file_length);
        b
    }

    /// The `meta_crc` a [`trailer`](Self::trailer) ends with.
    pub fn meta_crc_of_trailer(trailer: &[u8]) -> u32 {
        let n = trailer.len();
        u32::from_le_bytes(
            trailer[n - 4..]
                .try_into()
                .expect("a trailer ends with its CRC"),
        )
    }
}
