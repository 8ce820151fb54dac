//! Raster images (PNG, JPEG): dimensions, downscaling, re-encoding; and SVG summaries.

use std::io::Cursor;

use base64::Engine as _;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

use crate::CondenseError;
use crate::html::{Token, attribute, collapse_whitespace, decode_entities, tokenize};
use crate::terminal::group_thousands;

/// Largest width or height accepted for decoding; larger images are reported, not decoded.
const MAX_DECODE_SIDE: u32 = 20_000;
/// Largest allocation the decoders may make.
const MAX_DECODE_ALLOCATION: u64 = 512 * 1024 * 1024;
/// JPEG quality used when a JPEG is re-encoded after downscaling.
const JPEG_QUALITY: u8 = 80;

/// The raster formats returned as images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RasterFormat {
    /// PNG (`image/png`).
    Png,
    /// JPEG (`image/jpeg`).
    Jpeg,
}

impl RasterFormat {
    /// The MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            RasterFormat::Png => "image/png",
            RasterFormat::Jpeg => "image/jpeg",
        }
    }
}

/// An image ready to be returned, possibly downscaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownscaledImage {
    /// The encoded image (the input bytes themselves when no downscaling was needed).
    pub bytes: Vec<u8>,
    /// The format of `bytes`, the same as the input's.
    pub format: RasterFormat,
    /// Width in pixels of `bytes`.
    pub width: u32,
    /// Height in pixels of `bytes`.
    pub height: u32,
    /// Width in pixels of the input image.
    pub original_width: u32,
    /// Height in pixels of the input image.
    pub original_height: u32,
    /// Whether the image was resized and re-encoded.
    pub downscaled: bool,
}

/// A PNG or JPEG reader with decoding limits, and the format it detected.
type Reader<'a> = (ImageReader<Cursor<&'a [u8]>>, RasterFormat);

fn reader(bytes: &[u8]) -> Result<Reader<'_>, CondenseError> {
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|error| CondenseError::ImageDecode(error.to_string()))?;
    let format = match reader.format() {
        Some(ImageFormat::Png) => RasterFormat::Png,
        Some(ImageFormat::Jpeg) => RasterFormat::Jpeg,
        Some(other) => return Err(CondenseError::UnsupportedImageFormat(format!("{other:?}"))),
        None => return Err(CondenseError::UnsupportedImageFormat("unknown".to_owned())),
    };
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DECODE_SIDE);
    limits.max_image_height = Some(MAX_DECODE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOCATION);
    reader.limits(limits);
    Ok((reader, format))
}

/// The format and dimensions of a PNG or JPEG, read from its header without decoding pixels.
pub fn image_dimensions(bytes: &[u8]) -> Result<(RasterFormat, u32, u32), CondenseError> {
    let (reader, format) = reader(bytes)?;
    let (width, height) = reader
        .into_dimensions()
        .map_err(|error| CondenseError::ImageDecode(error.to_string()))?;
    Ok((format, width, height))
}

/// The size that fits `width × height` within `max_side` on its long side, keeping the aspect
/// ratio (rounded to the nearest pixel, at least 1).
pub fn fit_within(width: u32, height: u32, max_side: u32) -> (u32, u32) {
    let max_side = max_side.max(1);
    let long = width.max(height);
    if long <= max_side {
        return (width, height);
    }
    let scale = |side: u32| -> u32 {
        let scaled =
            (u64::from(side) * u64::from(max_side) + u64::from(long) / 2) / u64::from(long);
        u32::try_from(scaled).unwrap_or(max_side).clamp(1, max_side)
    };
    if width >= height {
        (max_side, scale(height))
    } else {
        (scale(width), max_side)
    }
}

/// Downscales a PNG or JPEG so that its long side is at most `max_side` pixels, keeping the
/// aspect ratio and the format (PNG stays PNG, JPEG stays JPEG at quality 80). An image that
/// already fits is returned as is, without re-encoding.
pub fn downscale_image(bytes: &[u8], max_side: u32) -> Result<DownscaledImage, CondenseError> {
    let (format, width, height) = image_dimensions(bytes)?;
    let (target_width, target_height) = fit_within(width, height, max_side);
    if (target_width, target_height) == (width, height) {
        return Ok(DownscaledImage {
            bytes: bytes.to_vec(),
            format,
            width,
            height,
            original_width: width,
            original_height: height,
            downscaled: false,
        });
    }
    let (reader, _) = reader(bytes)?;
    let decoded = reader
        .decode()
        .map_err(|error| CondenseError::ImageDecode(error.to_string()))?;
    // Triangle (bilinear with a support scaled to the reduction) is much faster than Lanczos and
    // good enough for an agent looking at a chart.
    let resized = decoded.resize_exact(target_width, target_height, FilterType::Triangle);
    let bytes = encode(&resized, format)?;
    Ok(DownscaledImage {
        bytes,
        format,
        width: target_width,
        height: target_height,
        original_width: width,
        original_height: height,
        downscaled: true,
    })
}

fn encode(image: &DynamicImage, format: RasterFormat) -> Result<Vec<u8>, CondenseError> {
    let mut out = Vec::new();
    let result = match format {
        RasterFormat::Png => {
            let encoder = PngEncoder::new_with_quality(
                &mut out,
                CompressionType::Default,
                PngFilter::Adaptive,
            );
            image.write_with_encoder(encoder)
        }
        RasterFormat::Jpeg => {
            // JPEG has no alpha channel: flatten to RGB (or keep grey).
            let flattened = if image.color().has_color() {
                DynamicImage::ImageRgb8(image.to_rgb8())
            } else {
                DynamicImage::ImageLuma8(image.to_luma8())
            };
            let encoder = JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
            flattened.write_with_encoder(encoder)
        }
    };
    result.map_err(|error| CondenseError::ImageEncode(format!("{}: {error}", format.mime())))?;
    Ok(out)
}

/// Decodes the base64 text of an image in a MIME bundle (line breaks and spaces allowed).
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>, CondenseError> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|error| CondenseError::Base64(error.to_string()))
}

pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A one-line summary of an SVG image: its size, element counts and the text it shows. SVG is
/// summarised rather than rendered: a renderer would cost far more compile time than the rest
/// of this crate, and charts drawn by matplotlib keep their labels as comments and glyph paths
/// that a summary can read.
pub fn summarize_svg(svg: &str) -> String {
    let tokens = tokenize(svg);
    let mut size = String::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut text_depth = 0usize;
    let mut current_text = String::new();
    let mut in_metadata = 0usize;
    let mut total = 0usize;
    for token in &tokens {
        match token {
            Token::Start(tag) => {
                if size.is_empty() && tag.name == "svg" {
                    size = svg_size(&tag.attributes);
                }
                if in_metadata == 0 {
                    total += 1;
                    match counts.iter_mut().find(|(counted, _)| *counted == tag.name) {
                        Some((_, count)) => *count += 1,
                        None => counts.push((tag.name.clone(), 1)),
                    }
                }
                if tag.opens(&["metadata"]) {
                    in_metadata += 1;
                }
                if tag.opens(&["text", "title", "desc"]) && in_metadata == 0 {
                    text_depth += 1;
                }
            }
            Token::End { name } => {
                if name == "metadata" {
                    in_metadata = in_metadata.saturating_sub(1);
                }
                if matches!(name.as_str(), "text" | "title" | "desc") && text_depth > 0 {
                    text_depth -= 1;
                    if text_depth == 0 {
                        push_label(&mut texts, &current_text);
                        current_text.clear();
                    }
                }
            }
            Token::Text(text) if text_depth > 0 => current_text.push_str(&decode_entities(text)),
            // Matplotlib draws text as glyph paths and writes the string in a comment.
            Token::Comment(comment) if in_metadata == 0 => push_label(&mut texts, comment),
            _ => {}
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let listed: Vec<String> = counts
        .iter()
        .take(6)
        .map(|(name, count)| format!("{name} {}", group_thousands(*count)))
        .collect();
    let mut summary = format!("{} elements", group_thousands(total));
    if !listed.is_empty() {
        summary.push_str(&format!(
            " ({}{})",
            listed.join(", "),
            if counts.len() > 6 { ", …" } else { "" }
        ));
    }
    if !size.is_empty() {
        summary = format!("{size}, {summary}");
    }
    if !texts.is_empty() {
        const MAX_LABELS: usize = 20;
        let shown: Vec<String> = texts
            .iter()
            .take(MAX_LABELS)
            .map(|text| format!("{text:?}"))
            .collect();
        summary.push_str(&format!("; text: {}", shown.join(", ")));
        if texts.len() > MAX_LABELS {
            summary.push_str(&format!(
                " and {} more",
                group_thousands(texts.len() - MAX_LABELS)
            ));
        }
    }
    summary
}

fn push_label(texts: &mut Vec<String>, raw: &str) {
    let text = collapse_whitespace(raw);
    if text.is_empty() || text.chars().count() > 80 || texts.contains(&text) {
        return;
    }
    texts.push(text);
}

fn svg_size(attributes: &[(String, String)]) -> String {
    let dimension = |key| attribute(attributes, key).map(short_dimension);
    match (
        dimension("width"),
        dimension("height"),
        attribute(attributes, "viewbox"),
    ) {
        (Some(width), Some(height), _) => format!("{width}×{height}"),
        (_, _, Some(view_box)) => {
            let parts: Vec<String> = view_box
                .split([' ', ','])
                .filter(|part| !part.is_empty())
                .map(short_dimension)
                .collect();
            if parts.len() == 4 {
                format!("{}×{} (viewBox)", parts[2], parts[3])
            } else {
                String::new()
            }
        }
        _ => String::new(),
    }
}

/// `316.303125pt` → `316pt`.
fn short_dimension(text: &str) -> String {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(text.len());
    match text[..number_end].parse::<f64>() {
        Ok(number) => format!("{}{}", number.round(), &text[number_end..]),
        Err(_) => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgba, RgbaImage};
    use proptest::prelude::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = RgbaImage::from_fn(width, height, |x, y| {
            Rgba([(x % 256) as u8, (y % 256) as u8, 128, 255])
        });
        encode(&DynamicImage::ImageRgba8(image), RasterFormat::Png).unwrap()
    }

    #[test]
    fn small_images_are_returned_untouched() {
        let bytes = png(40, 30);
        let result = downscale_image(&bytes, 1_200).unwrap();
        assert!(!result.downscaled);
        assert_eq!(result.bytes, bytes);
        assert_eq!((result.width, result.height), (40, 30));
    }

    #[test]
    fn large_png_is_downscaled_and_stays_png() {
        let result = downscale_image(&png(300, 100), 120).unwrap();
        assert!(result.downscaled);
        assert_eq!((result.width, result.height), (120, 40));
        assert_eq!(
            image_dimensions(&result.bytes).unwrap(),
            (RasterFormat::Png, 120, 40)
        );
    }

    #[test]
    fn jpeg_stays_jpeg() {
        let jpeg = encode(
            &DynamicImage::ImageRgba8(RgbaImage::new(100, 400)),
            RasterFormat::Jpeg,
        )
        .unwrap();
        let result = downscale_image(&jpeg, 100).unwrap();
        assert_eq!(
            image_dimensions(&result.bytes).unwrap(),
            (RasterFormat::Jpeg, 25, 100)
        );
    }

    #[test]
    fn other_formats_and_garbage_are_errors() {
        assert!(matches!(
            downscale_image(b"GIF89a....", 10),
            Err(CondenseError::UnsupportedImageFormat(_))
        ));
        assert!(downscale_image(b"\x89PNG\r\n\x1a\nbroken", 10).is_err());
        assert!(downscale_image(b"", 10).is_err());
    }

    #[test]
    fn svg_summary_reads_size_counts_and_labels() {
        let svg = "<?xml version=\"1.0\"?><svg width=\"316.3pt\" height=\"226.8pt\" viewBox=\"0 0 316 226\">\
                   <metadata><dc:title>Matplotlib</dc:title><!-- meta --></metadata>\
                   <g id=\"text_1\"><!-- Sales per month --><path d=\"M0\"/></g><text>x &amp; y</text></svg>";
        assert_eq!(
            summarize_svg(svg),
            "316pt×227pt, 5 elements (g 1, metadata 1, path 1, svg 1, text 1); text: \"Sales per month\", \"x & y\""
        );
    }

    proptest! {
        #[test]
        fn fit_keeps_aspect_ratio_and_bound(width in 1u32..20_000, height in 1u32..20_000, max in 1u32..3_000) {
            let (fitted_width, fitted_height) = fit_within(width, height, max);
            prop_assert!(fitted_width >= 1 && fitted_height >= 1);
            if width.max(height) <= max {
                prop_assert_eq!((fitted_width, fitted_height), (width, height));
            } else {
                prop_assert_eq!(fitted_width.max(fitted_height), max);
                // Cross-multiplied ratio error is at most half a pixel of the short side, scaled.
                let error = (u64::from(fitted_width) * u64::from(height)).abs_diff(u64::from(fitted_height) * u64::from(width));
                prop_assert!(error <= u64::from(width.max(height)), "{} {} -> {} {}", width, height, fitted_width, fitted_height);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn downscale_keeps_aspect_ratio_and_long_side_limit(width in 1u32..400, height in 1u32..400, max in 1u32..120) {
            let result = downscale_image(&png(width, height), max).unwrap();
            prop_assert!(result.width.max(result.height) <= max.max(1));
            prop_assert_eq!((result.width, result.height), fit_within(width, height, max));
            prop_assert_eq!(image_dimensions(&result.bytes).unwrap(), (RasterFormat::Png, result.width, result.height));
        }
    }
}
