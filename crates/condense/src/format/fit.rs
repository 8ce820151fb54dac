//! Fitting the parts into the budget: the bodies share it, then the whole text is bounded.

use super::{FormattedOutputs, Formatter, MIN_TEXT_BOUND, Part};
use crate::truncate::{head_tail, marker_overhead};

impl Formatter<'_> {
    pub(super) fn finish(mut self, no_outputs: bool) -> FormattedOutputs {
        let max_chars = self.options.max_chars;
        let text = if self.parts.is_empty() {
            (if no_outputs {
                "(no outputs)"
            } else {
                "(no visible output)"
            })
            .to_owned()
        } else {
            self.fit_parts(max_chars.max(MIN_TEXT_BOUND));
            join_parts(&self.parts)
        };
        let text = self.bound(text);
        FormattedOutputs {
            text,
            images: self.images,
            image_reports: self.image_reports,
            truncated: self.truncated,
            dropped_chars: self.dropped_chars,
        }
    }

    /// Shares the budget between the bodies: bodies under their fair share keep everything, the
    /// others share what is left equally and are cut head + tail.
    pub(super) fn fit_parts(&mut self, max_chars: usize) {
        let total: usize = join_parts(&self.parts).chars().count();
        if total <= max_chars {
            return;
        }
        let body_lengths: Vec<usize> = self
            .parts
            .iter()
            .map(|part| part.body.chars().count())
            .collect();
        let bodies: usize = body_lengths.iter().sum();
        let fixed = total - bodies;
        let available = max_chars.saturating_sub(fixed);
        // Errors first, as long as they leave a quarter of the budget to the rest; then
        // water-filling: bodies under their fair share keep everything.
        let mut allocation = vec![0usize; self.parts.len()];
        let priority: Vec<usize> = (0..self.parts.len())
            .filter(|&index| self.parts[index].priority && body_lengths[index] > 0)
            .collect();
        let priority_total: usize = priority.iter().map(|&index| body_lengths[index]).sum();
        let mut remaining = available;
        let mut shared: Vec<usize> = (0..self.parts.len())
            .filter(|&index| body_lengths[index] > 0)
            .collect();
        if priority_total <= available / 4 * 3 {
            for &index in &priority {
                allocation[index] = body_lengths[index];
            }
            remaining -= priority_total;
            shared.retain(|index| !priority.contains(index));
        }
        shared.sort_by_key(|&index| (body_lengths[index], index));
        for (position, &index) in shared.iter().enumerate() {
            let share = remaining / (shared.len() - position);
            let given = body_lengths[index].min(share);
            allocation[index] = given;
            remaining -= given;
        }
        for (index, part) in self.parts.iter_mut().enumerate() {
            let length = body_lengths[index];
            if length <= allocation[index] {
                continue;
            }
            let overhead = marker_overhead(length, part.body.matches('\n').count());
            let mut kept = allocation[index].saturating_sub(overhead);
            if kept < 20 {
                kept = 0;
            }
            let cut = head_tail(&part.body, kept);
            self.dropped_chars += cut.dropped_chars;
            self.truncated = true;
            part.body = cut.text.into_owned();
        }
    }

    /// The last resort when headers alone exceed the budget: cut the whole text.
    pub(super) fn bound(&mut self, text: String) -> String {
        let max_chars = self.options.max_chars.max(MIN_TEXT_BOUND);
        match cut_to_bound(&text, max_chars) {
            None => text,
            Some((cut, dropped_chars)) => {
                self.dropped_chars += dropped_chars;
                self.truncated = true;
                cut
            }
        }
    }
}

fn join_parts(parts: &[Part]) -> String {
    let mut out = String::new();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            out.push_str(if parts[index - 1].group == part.group {
                "\n"
            } else {
                "\n\n"
            });
        }
        out.push_str(&part.header);
        if !part.body.is_empty() {
            out.push('\n');
            out.push_str(&part.body);
        }
    }
    out
}

/// `text` cut head + tail to at most `max_chars` characters, markers included, with the number
/// of characters dropped; `None` when it fits.
pub(super) fn cut_to_bound(text: &str, max_chars: usize) -> Option<(String, usize)> {
    let length = text.chars().count();
    if length <= max_chars {
        return None;
    }
    let overhead = marker_overhead(length, text.matches('\n').count());
    let cut = head_tail(text, max_chars.saturating_sub(overhead));
    Some((cut.text.into_owned(), cut.dropped_chars))
}
