//! What an agent sees of saved and live outputs, through the `condense` crate: condensed text
//! with every cut marked, and images as MCP image content within a per-response budget.

use condense::{FormatOptions, format_outputs};
use mcp_contract::params::OutputMode;
use serde_json::Value;

use mcp_contract::ImageContent;

/// Images returned in one response, at most.
pub const MAX_IMAGES_PER_RESPONSE: usize = 8;
/// Encoded image bytes returned in one response, at most.
pub const MAX_IMAGE_BYTES_PER_RESPONSE: usize = 2_000_000;

/// The long side of a full-size returned image, at most.
pub const MAX_IMAGE_SIDE: u32 = 1_200;
/// Thumbnails (the images of a read that did not ask for images) returned in one response, at
/// most.
pub const MAX_THUMBNAILS_PER_RESPONSE: usize = 6;
/// The long side of a thumbnail, at most: about 100 to 140 image tokens each (width × height /
/// 750), against up to about 1,900 for a full-size image.
pub const THUMBNAIL_SIDE: u32 = 320;
/// Encoded thumbnail bytes returned in one response, at most.
pub const MAX_THUMBNAIL_BYTES_PER_RESPONSE: usize = 300_000;

/// What is left of a response's image allowance.
#[derive(Debug, Clone, Copy)]
pub struct ImageBudget {
    pub images: usize,
    pub bytes: usize,
    /// The long side of each returned image, at most.
    pub max_side: u32,
}

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget {
            images: MAX_IMAGES_PER_RESPONSE,
            bytes: MAX_IMAGE_BYTES_PER_RESPONSE,
            max_side: MAX_IMAGE_SIDE,
        }
    }
}

impl ImageBudget {
    /// The allowance of a read that did not ask for images: a few small thumbnails.
    pub fn thumbnails() -> Self {
        ImageBudget {
            images: MAX_THUMBNAILS_PER_RESPONSE,
            bytes: MAX_THUMBNAIL_BYTES_PER_RESPONSE,
            max_side: THUMBNAIL_SIDE,
        }
    }
}

/// One image returned with a cell's outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedImage {
    /// 0-based index of the output it came from.
    pub output_index: usize,
    pub content: ImageContent,
    /// Width and height as returned.
    pub width: u32,
    pub height: u32,
    /// Whether it was resized to fit the budget's side or bytes.
    pub downscaled: bool,
}

/// Output text and images for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedOutputs {
    pub text: String,
    pub truncated: bool,
    pub images: Vec<RenderedImage>,
}

/// Renders one cell's outputs, spending from `budget` when images are requested.
pub fn render_outputs(
    outputs: &[Value],
    mode: OutputMode,
    max_chars: usize,
    images: Option<&mut ImageBudget>,
) -> RenderedOutputs {
    if outputs.is_empty() {
        return RenderedOutputs {
            text: "(no saved output)".to_owned(),
            truncated: false,
            images: Vec::new(),
        };
    }
    let (include_images, max_images, max_image_bytes, max_image_side) = match &images {
        Some(budget) => (
            budget.images > 0,
            budget.images,
            budget.bytes,
            budget.max_side,
        ),
        None => (false, 0, 0, MAX_IMAGE_SIDE),
    };
    let options = FormatOptions {
        mode,
        max_chars,
        include_images,
        max_images,
        max_image_bytes,
        max_image_side,
        ..FormatOptions::default()
    };
    let formatted = format_outputs(outputs, &options);
    let returned: Vec<RenderedImage> = formatted
        .images
        .into_iter()
        .map(|image| RenderedImage {
            output_index: image.output_index,
            content: ImageContent {
                data: image.base64,
                mime_type: image.mime.to_owned(),
            },
            width: image.width,
            height: image.height,
            downscaled: image.downscaled,
        })
        .collect();
    if let Some(budget) = images {
        budget.images = budget.images.saturating_sub(returned.len());
        // Base64 carries 3 bytes in 4 characters.
        let bytes: usize = returned
            .iter()
            .map(|image| image.content.data.len() / 4 * 3)
            .sum();
        budget.bytes = budget.bytes.saturating_sub(bytes);
    }
    RenderedOutputs {
        text: formatted.text,
        truncated: formatted.truncated,
        images: returned,
    }
}

/// The formatter the execution registry uses for receipt text (images are added separately).
pub fn receipt_formatter(outputs: &[Value], mode: OutputMode, max_chars: usize) -> String {
    let options = FormatOptions {
        mode,
        max_chars,
        include_images: false,
        ..FormatOptions::default()
    };
    format_outputs(outputs, &options).text
}
