//! What an agent sees of saved and live outputs, through the `condense` crate: condensed text
//! with every cut marked, and images as MCP image content within a per-response budget.

use condense::{FormatOptions, format_outputs};
use mcp_contract::params::OutputMode;
use serde_json::Value;

use crate::tools::ImageContent;

/// Images returned in one response, at most.
pub const MAX_IMAGES_PER_RESPONSE: usize = 8;
/// Encoded image bytes returned in one response, at most.
pub const MAX_IMAGE_BYTES_PER_RESPONSE: usize = 2_000_000;

/// What is left of a response's image allowance.
#[derive(Debug, Clone, Copy)]
pub struct ImageBudget {
    pub images: usize,
    pub bytes: usize,
}

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget {
            images: MAX_IMAGES_PER_RESPONSE,
            bytes: MAX_IMAGE_BYTES_PER_RESPONSE,
        }
    }
}

/// Output text and images for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedOutputs {
    pub text: String,
    pub truncated: bool,
    /// Images with the 0-based output index they came from, width and height.
    pub images: Vec<(usize, ImageContent, u32, u32)>,
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
    let (include_images, max_images, max_image_bytes) = match &images {
        Some(budget) => (budget.images > 0, budget.images, budget.bytes),
        None => (false, 0, 0),
    };
    let options = FormatOptions {
        mode,
        max_chars,
        include_images,
        max_images,
        max_image_bytes,
        ..FormatOptions::default()
    };
    let formatted = format_outputs(outputs, &options);
    let returned: Vec<(usize, ImageContent, u32, u32)> = formatted
        .images
        .into_iter()
        .map(|image| {
            (
                image.output_index,
                ImageContent {
                    data: image.base64,
                    mime_type: image.mime.to_owned(),
                },
                image.width,
                image.height,
            )
        })
        .collect();
    if let Some(budget) = images {
        budget.images = budget.images.saturating_sub(returned.len());
        // Base64 carries 3 bytes in 4 characters.
        let bytes: usize = returned
            .iter()
            .map(|(_, image, _, _)| image.data.len() / 4 * 3)
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
