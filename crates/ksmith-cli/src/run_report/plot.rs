//! The best-so-far charts, drawn with plotters' SVG backend into strings that the page inlines
//! (no script, no fetch: the page works offline and shows the same in any browser).

use ksmith_results::run::ProgressPoint;
use plotters::prelude::*;

/// Which spend a chart's x axis measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Axis {
    /// Seconds since the run started.
    Wall,
    /// Evaluations run.
    Evaluations,
    /// LLM tokens spent.
    Tokens,
}

impl Axis {
    /// Every chart the report draws, in page order.
    pub(crate) const ALL: [Axis; 3] = [Axis::Wall, Axis::Evaluations, Axis::Tokens];

    fn of(self, p: &ProgressPoint) -> f64 {
        match self {
            Axis::Wall => p.wall_s,
            Axis::Evaluations => p.evaluations,
            Axis::Tokens => p.tokens,
        }
    }

    /// The axis label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Axis::Wall => "wall time (s)",
            Axis::Evaluations => "evaluations",
            Axis::Tokens => "LLM tokens",
        }
    }

    /// Element id of the chart on the page.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Axis::Wall => "plot-wall",
            Axis::Evaluations => "plot-evals",
            Axis::Tokens => "plot-tokens",
        }
    }
}

/// Chart size in pixels.
pub(crate) const SIZE: (u32, u32) = (400, 300);

/// One chart: best speedup so far against `axis`, a step line with a dot where it improved and
/// the baseline (1x) dashed; an empty frame with a caption when nothing passed.
pub(crate) fn best_so_far(points: &[ProgressPoint], axis: Axis) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let xmax = points
            .iter()
            .map(|p| axis.of(p))
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.05;
        let ymax = points
            .iter()
            .map(|p| p.best)
            .fold(1.0f64, f64::max)
            .max(1.0)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("best speedup vs {}", axis.label()),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(axis.label())
            .y_desc("best speedup (x)")
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| e.to_string())?;
        let grey = RGBColor(150, 150, 150);
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, 1.0), (xmax, 1.0)],
                6,
                4,
                grey.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?;
        // A step function: the best holds until the next improvement.
        let mut steps = Vec::with_capacity(points.len() * 2 + 1);
        for p in points {
            let x = axis.of(p);
            if let Some(&(_, y)) = steps.last() {
                steps.push((x, y));
            }
            steps.push((x, p.best));
        }
        if let Some(&(_, y)) = steps.last() {
            steps.push((xmax, y));
        }
        let blue = RGBColor(31, 94, 168);
        chart
            .draw_series(LineSeries::new(steps, blue.stroke_width(3)))
            .map_err(|e| e.to_string())?;
        let mut last = None;
        let improved = points.iter().filter(|p| {
            let up = last.is_none_or(|b| p.best > b);
            last = Some(p.best);
            up
        });
        chart
            .draw_series(improved.map(|p| Circle::new((axis.of(p), p.best), 5, blue.filled())))
            .map_err(|e| e.to_string())?;
        if points.is_empty() {
            root.draw(&Text::new(
                "no candidate passed",
                (130, 150),
                ("sans-serif", 16).into_font().color(&grey),
            ))
            .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    // Inline SVG in HTML needs no namespace; dropping it keeps the page free of any URL.
    Ok(svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_an_inline_svg_with_no_url_and_one_dot_per_improvement() {
        let p = |x: f64, best: f64| ProgressPoint {
            wall_s: x,
            evaluations: x,
            tokens: x * 100.0,
            best,
        };
        let svg = best_so_far(&[p(1.0, 1.2), p(2.0, 1.2), p(3.0, 1.8)], Axis::Tokens).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(!svg.contains("http"), "{svg}");
        assert!(svg.contains("best speedup vs LLM tokens"));
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        let empty = best_so_far(&[], Axis::Wall).unwrap();
        assert!(empty.contains("no candidate passed"));
    }
}
