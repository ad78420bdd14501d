//! Request bodies sent compressed (`Content-Encoding: zstd`, `gzip`, `br`, `deflate`): decoded
//! before anything reads them, so the proxy and every upstream only ever see plain JSON.
//!
//! Invariants:
//! - The limit is on the decoded size. Decoding streams into a buffer that grows with what came
//!   out and stops one byte past the limit: a small body that claims (or holds) gigabytes costs
//!   the limit in memory and the time to produce it, never the size it claims.
//! - zstd frames may ask for a window of at most [`MAX_ZSTD_WINDOW`]: the decoder allocates the
//!   window a frame declares, before any output exists to count against the limit.
//! - One coding at a time. A list (`gzip, br`) is refused: no client sends one, and each stage
//!   would hold a window of its own.
//!
//! Pure over bytes: no HTTP types, so the table below tests it without a server.

use std::io::Read;

/// The codings a request body may be sent in, as the refusal lists them.
pub(crate) const SUPPORTED: &str = "`zstd`, `gzip`, `br`, `deflate` or `identity`";

/// The largest zstd window a frame may ask for. zstd's own decoders default to 128 MiB
/// (`--long`); 8 MiB is what the zstd format recommends decoders to support at least, and what
/// `zstd -19` stays within.
pub(crate) const MAX_ZSTD_WINDOW: u64 = 8 * 1024 * 1024;

/// How a request body was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    /// As is: no header, or `identity`.
    Identity,
    Zstd,
    Gzip,
    /// `br`.
    Brotli,
    /// `deflate`: zlib-wrapped as HTTP says, or raw deflate as some clients send it.
    Deflate,
}

impl Coding {
    /// The coding a `Content-Encoding` value names (case-insensitive, blanks around it
    /// ignored); `None` for no header.
    pub(crate) fn of(header: Option<&[u8]>) -> Result<Self, DecodeError> {
        let Some(header) = header else { return Ok(Self::Identity) };
        let text = String::from_utf8_lossy(header);
        let mut named = text.split(',').map(str::trim).filter(|c| !c.is_empty()).filter(|c| {
            // `identity` in a list changes nothing.
            !c.eq_ignore_ascii_case("identity")
        });
        let Some(first) = named.next() else { return Ok(Self::Identity) };
        if named.next().is_some() {
            return Err(DecodeError::Stacked(text.trim().to_owned()));
        }
        match first.to_ascii_lowercase().as_str() {
            "zstd" => Ok(Self::Zstd),
            "gzip" | "x-gzip" => Ok(Self::Gzip),
            "br" => Ok(Self::Brotli),
            "deflate" => Ok(Self::Deflate),
            _ => Err(DecodeError::Unsupported(first.to_owned())),
        }
    }

    /// Its name in `Content-Encoding`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Zstd => "zstd",
            Self::Gzip => "gzip",
            Self::Brotli => "br",
            Self::Deflate => "deflate",
        }
    }
}

/// Why a body could not be decoded. Each message names the coding and what to do instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum DecodeError {
    #[error(
        "`Content-Encoding: {0}` is not supported: send the body as {SUPPORTED} (see docs/api.md)"
    )]
    Unsupported(String),
    #[error(
        "`Content-Encoding: {0}` applies more than one coding: send the body in one of {SUPPORTED} \
         (see docs/api.md)"
    )]
    Stacked(String),
    #[error(
        "the request body, decoded from `{coding}`, is larger than {limit} bytes (the limit \
         applies to the decoded body)"
    )]
    TooLarge { coding: &'static str, limit: usize },
    #[error(
        "the `zstd` request body asks for a {requested}-byte window; at most {MAX_ZSTD_WINDOW} \
         bytes (8 MiB) are accepted: compress without `--long` or with a smaller window"
    )]
    WindowTooLarge { requested: u64 },
    #[error("cannot decode the request body as `{coding}` (its `Content-Encoding`): {reason}")]
    Corrupt { coding: &'static str, reason: String },
}

/// `body` decoded from `coding`, at most `limit` bytes of it; `None` when it was sent as is
/// (the caller keeps its bytes, no copy).
pub(crate) fn decode(
    coding: Coding,
    body: &[u8],
    limit: usize,
) -> Result<Option<Vec<u8>>, DecodeError> {
    let name = coding.name();
    let corrupt =
        |error: std::io::Error| DecodeError::Corrupt { coding: name, reason: error.to_string() };
    let decoded = match coding {
        Coding::Identity => return Ok(None),
        Coding::Gzip => capped(flate2::read::MultiGzDecoder::new(body), limit),
        Coding::Deflate if is_zlib(body) => capped(flate2::read::ZlibDecoder::new(body), limit),
        Coding::Deflate => capped(flate2::read::DeflateDecoder::new(body), limit),
        // The buffer size is the decoder's input buffer; its window is what the stream says
        // (at most 16 MiB: the large-window extension is not enabled).
        Coding::Brotli => capped(brotli::Decompressor::new(body, 4096), limit),
        Coding::Zstd => capped(ZstdFrames { rest: body, frame: None }, limit),
    };
    decoded.map(Some).map_err(|error| match error {
        Capped::TooLarge => DecodeError::TooLarge { coding: name, limit },
        Capped::Io(error) => match window_refusal(&error) {
            Some(requested) => DecodeError::WindowTooLarge { requested },
            None => corrupt(error),
        },
    })
}

enum Capped {
    TooLarge,
    Io(std::io::Error),
}

/// What `reader` yields, at most `limit` bytes: the buffer grows with the output (never
/// reserved ahead from a size the input claims), and one byte past the limit ends it.
fn capped(mut reader: impl Read, limit: usize) -> Result<Vec<u8>, Capped> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX);
    (&mut reader).take(cap).read_to_end(&mut out).map_err(Capped::Io)?;
    if out.len() == limit {
        let mut one = [0_u8; 1];
        if reader.read(&mut one).map_err(Capped::Io)? > 0 {
            return Err(Capped::TooLarge);
        }
    }
    Ok(out)
}

/// Whether a `deflate` body has the zlib wrapper HTTP specifies: a compression method of 8
/// and a header checksum that divides by 31. Raw deflate rarely passes both by chance, and
/// a body that does fails to decode with a message naming the coding.
fn is_zlib(body: &[u8]) -> bool {
    match body {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

/// Every zstd frame of a body, one after another (a stream may hold several), each checked
/// for its window before it is decoded.
struct ZstdFrames<'b> {
    rest: &'b [u8],
    frame: Option<ruzstd::decoding::StreamingDecoder<&'b [u8], ruzstd::decoding::FrameDecoder>>,
}

impl Read for ZstdFrames<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use ruzstd::decoding::StreamingDecoder;
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        loop {
            if let Some(frame) = &mut self.frame {
                let n = frame.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                // The frame ended; its source is what follows it.
                self.rest = frame.get_ref();
                self.frame = None;
            }
            if self.rest.is_empty() {
                return Ok(0);
            }
            // `&[u8]` is `Copy`: the decoder reads from a copy, `self.rest` stays at the frame.
            match StreamingDecoder::new_with_max_window_size(self.rest, MAX_ZSTD_WINDOW) {
                Ok(frame) => self.frame = Some(frame),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    // A skippable frame (metadata): its magic and length, then its data.
                    let end = usize::try_from(length).map_or(usize::MAX, |n| n.saturating_add(8));
                    self.rest = self.rest.get(end..).unwrap_or_default();
                }
                Err(error) => return Err(std::io::Error::other(error)),
            }
        }
    }
}

/// The window a zstd frame asked for, when that is why decoding stopped.
fn window_refusal(error: &std::io::Error) -> Option<u64> {
    let inner = error.get_ref()?.downcast_ref::<ruzstd::decoding::errors::FrameDecoderError>()?;
    match inner {
        ruzstd::decoding::errors::FrameDecoderError::WindowSizeTooBig { requested, .. } => {
            Some(*requested)
        }
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write as _;

    use super::*;

    /// A zstd frame of `blocks` RLE blocks of 128 KiB of `byte` each, with the window
    /// descriptor `window`: about four bytes per 128 KiB, the densest zstd there is.
    pub(crate) fn zstd_rle(byte: u8, blocks: u32, window: u8) -> Vec<u8> {
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, window];
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let header = (128 * 1024) << 3 | 1 << 1 | last;
            frame.extend_from_slice(&header.to_le_bytes()[..3]);
            frame.push(byte);
        }
        frame
    }

    /// The window descriptor of a `2^log` byte window.
    pub(crate) fn window(log: u8) -> u8 {
        (log - 10) << 3
    }

    const TEXT: &[u8] =
        br#"{"model":"m","messages":[{"role":"user","content":"hello, hello, hello"}]}"#;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// A `Content-Encoding` value, and what it names.
    type Row<'h> = (Option<&'h [u8]>, Result<Coding, DecodeError>);

    #[test]
    fn the_header_names_one_coding_in_any_case_and_identity_changes_nothing() {
        let cases: [Row<'_>; 9] = [
            (None, Ok(Coding::Identity)),
            (Some(b"identity"), Ok(Coding::Identity)),
            (Some(b""), Ok(Coding::Identity)),
            (Some(b" ZSTD "), Ok(Coding::Zstd)),
            (Some(b"gzip"), Ok(Coding::Gzip)),
            (Some(b"br, identity"), Ok(Coding::Brotli)),
            (Some(b"Deflate"), Ok(Coding::Deflate)),
            (Some(b"compress"), Err(DecodeError::Unsupported("compress".into()))),
            (Some(b"gzip, br"), Err(DecodeError::Stacked("gzip, br".into()))),
        ];
        for (header, expected) in cases {
            assert_eq!(Coding::of(header), expected, "{header:?}");
        }
        let message = Coding::of(Some(b"compress")).unwrap_err().to_string();
        for named in ["compress", "zstd", "gzip", "br", "deflate"] {
            assert!(message.contains(named), "{message}");
        }
    }

    #[test]
    fn every_coding_decodes_to_the_bytes_sent() {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(TEXT).unwrap();
        let mut raw =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(TEXT).unwrap();
        let mut br = Vec::new();
        brotli::BrotliCompress(
            &mut &TEXT[..],
            &mut br,
            &brotli::enc::BrotliEncoderParams::default(),
        )
        .unwrap();
        let zstd =
            ruzstd::encoding::compress_to_vec(TEXT, ruzstd::encoding::CompressionLevel::Fastest);
        let cases = [
            (Coding::Gzip, gzip(TEXT)),
            (Coding::Deflate, zlib.finish().unwrap()),
            (Coding::Deflate, raw.finish().unwrap()),
            (Coding::Brotli, br),
            (Coding::Zstd, zstd.clone()),
            (Coding::Zstd, [zstd.clone(), zstd].concat()),
        ];
        for (i, (coding, body)) in cases.into_iter().enumerate() {
            let decoded = decode(coding, &body, 1024).unwrap().unwrap();
            let expected = if i == 5 { [TEXT, TEXT].concat() } else { TEXT.to_vec() };
            assert_eq!(decoded, expected, "case {i} ({coding:?})");
        }
        assert_eq!(decode(Coding::Identity, TEXT, 1024), Ok(None));
    }

    #[test]
    fn the_limit_is_on_the_decoded_size_and_one_byte_past_it_is_too_large() {
        let exactly = gzip(&[b' '; 1000]);
        assert_eq!(decode(Coding::Gzip, &exactly, 1000).unwrap().unwrap().len(), 1000);
        let over = gzip(&[b' '; 1001]);
        assert_eq!(
            decode(Coding::Gzip, &over, 1000),
            Err(DecodeError::TooLarge { coding: "gzip", limit: 1000 })
        );
    }

    #[test]
    fn a_zstd_bomb_stops_at_the_limit() {
        // 64 MiB from 2 KB.
        let bomb = zstd_rle(b'a', 512, window(20));
        assert!(bomb.len() < 2100, "{}", bomb.len());
        let started = tokio::time::Instant::now();
        assert_eq!(
            decode(Coding::Zstd, &bomb, 1 << 20),
            Err(DecodeError::TooLarge { coding: "zstd", limit: 1 << 20 })
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let fits = zstd_rle(b'a', 2, window(20));
        assert_eq!(decode(Coding::Zstd, &fits, 1 << 20).unwrap().unwrap(), vec![b'a'; 256 * 1024]);
    }

    #[test]
    fn a_zstd_frame_asking_for_more_than_8_mib_of_window_is_refused_before_decoding() {
        let wide = zstd_rle(b'a', 1, window(24));
        let refused = decode(Coding::Zstd, &wide, 1 << 20).unwrap_err();
        assert_eq!(refused, DecodeError::WindowTooLarge { requested: 1 << 24 });
        assert!(refused.to_string().contains("8 MiB"), "{refused}");
        assert!(decode(Coding::Zstd, &zstd_rle(b'a', 1, window(23)), 1 << 20).is_ok());
    }

    #[test]
    fn a_body_cut_short_or_not_in_its_coding_names_the_coding() {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(TEXT).unwrap();
        let mut br = Vec::new();
        let params = brotli::enc::BrotliEncoderParams::default();
        brotli::BrotliCompress(&mut &TEXT[..], &mut br, &params).unwrap();
        let zstd =
            ruzstd::encoding::compress_to_vec(TEXT, ruzstd::encoding::CompressionLevel::Fastest);
        let cut = |mut body: Vec<u8>| {
            body.truncate(body.len() / 2);
            body
        };
        let cases = [
            (Coding::Gzip, cut(gzip(TEXT))),
            (Coding::Gzip, TEXT.to_vec()),
            (Coding::Deflate, cut(zlib.finish().unwrap())),
            (Coding::Brotli, cut(br)),
            (Coding::Zstd, cut(zstd)),
            (Coding::Zstd, TEXT.to_vec()),
        ];
        for (coding, body) in cases {
            let refused = decode(coding, &body, 1024).unwrap_err();
            assert!(
                matches!(refused, DecodeError::Corrupt { coding: name, .. } if name == coding.name()),
                "{coding:?}: {refused:?}"
            );
            assert!(refused.to_string().contains(coding.name()), "{refused}");
        }
    }
}
