//! A call's way through the tools: the name parsed once into a [`ToolName`], the Colab setup
//! guard, the tool, the resource links of its reply and the reply budget.

use mcp_contract::dispatch::{BoxFuture, CallContext, ToolDispatch, ToolOutput, ToolRequest};

use super::Tools;
use crate::failure::error;

use std::collections::HashSet;

use mcp_contract::catalog::{RETIRED_TOOLS, ToolName, ToolSpec};
use mcp_contract::params::*;
use mcp_contract::{ErrorCode, parse_arguments};
use serde_json::{Map, Value};

use crate::budget;
use crate::host::NotebookHost;

impl<H: NotebookHost> ToolDispatch for Tools<H> {
    fn specs(&self) -> Vec<ToolSpec> {
        self.listed.specs.clone()
    }

    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            self.call(&request.name, request.arguments, request.context)
                .await
        })
    }

    fn list_resources(&self) -> BoxFuture<'_, Vec<mcp_contract::ResourceEntry>> {
        Box::pin(async move { Tools::list_resources(self).await })
    }

    fn read_resource(
        &self,
        uri: String,
    ) -> BoxFuture<'_, Result<Vec<mcp_contract::ResourceBody>, mcp_contract::ResourceError>> {
        Box::pin(async move { Tools::read_resource(self, &uri).await })
    }

    fn resource_versions(&self, uris: Vec<String>) -> BoxFuture<'_, Vec<Option<u64>>> {
        Box::pin(async move { Tools::resource_versions(self, &uris).await })
    }
}

impl<H: NotebookHost> Tools<H> {
    /// Runs one tool call.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        context: CallContext,
    ) -> ToolOutput {
        let listed = ToolName::parse(name).and_then(|tool| Some((tool, self.input_schema(tool)?)));
        let Some((tool, schema)) = listed else {
            let message = match RETIRED_TOOLS.iter().find(|(retired, _)| *retired == name) {
                Some((_, replacement)) => {
                    format!(
                        "the tool `{name}` was removed; use {replacement} instead (refresh your tool list)"
                    )
                }
                None => {
                    format!("no tool is named `{name}`; call tools/list for the available tools")
                }
            };
            return ToolOutput::failure(error(ErrorCode::UnknownTool, message));
        };
        macro_rules! with {
            ($method:ident) => {
                match parse_arguments(arguments, schema) {
                    Ok(params) => self.$method(params).await,
                    Err(error) => Err(error),
                }
            };
            ($method:ident, context) => {
                match parse_arguments(arguments, schema) {
                    Ok(params) => self.$method(params, &context).await,
                    Err(error) => Err(error),
                }
            };
        }
        if let Err(blocked) = self.setup_guard(tool, arguments.as_ref()).await {
            return ToolOutput::failure(blocked);
        }
        let result = match tool {
            ToolName::ListNotebooks => {
                match parse_arguments::<ListNotebooksParams>(arguments, schema) {
                    Ok(_) => self.list_notebooks().await,
                    Err(error) => Err(error),
                }
            }
            ToolName::OpenNotebooks => with!(open_notebooks),
            ToolName::CreateNotebook => with!(create_notebook),
            ToolName::ReadNotebook => with!(read_notebook),
            ToolName::SearchCells => with!(search_cells),
            ToolName::EditCells => with!(edit_cells, context),
            ToolName::MoveCells => with!(move_cells),
            ToolName::ClearCellOutputs => with!(clear_cell_outputs),
            ToolName::SaveNotebooks => with!(save_notebooks),
            ToolName::ExportNotebook => with!(export_notebook),
            ToolName::UndoLast => with!(undo_last),
            ToolName::GetKernelInfo => with!(kernel_info),
            ToolName::ListKernels => with!(list_kernels),
            ToolName::SelectKernel => with!(select_kernel),
            ToolName::ConfigureKernel => with!(configure_kernel, context),
            ToolName::RestartKernels => with!(restart_kernels),
            ToolName::InterruptKernels => with!(interrupt_kernels),
            ToolName::RunCells => with!(run_cells, context),
            ToolName::GetExecution => with!(get_execution, context),
            ToolName::SummarizeCells => with!(summarize_cells),
            ToolName::InspectVariable => with!(inspect_variable),
            ToolName::UploadFile => with!(upload_file, context),
            ToolName::DownloadFile => with!(download_file, context),
            ToolName::CheckColab => with!(check_colab),
            ToolName::GetKernelSetup => with!(get_kernel_setup),
            ToolName::ListSetupKernels => with!(list_setup_kernels),
            ToolName::SelectSetupKernel => with!(select_setup_kernel),
            ToolName::CancelKernelSetup => with!(cancel_kernel_setup),
            ToolName::MountColabServer => with!(mount_colab_server),
            ToolName::InspectColabEnvironmentPreflight => with!(colab_preflight),
            ToolName::ListColabTerminals => with!(list_colab_terminals),
            ToolName::CloseColabTerminals => with!(close_colab_terminals),
            ToolName::PrepareColabEnvironment => with!(prepare_colab_environment),
            ToolName::GetColabEnvironmentPreparation => with!(get_colab_environment_preparation),
        };
        let output = match result {
            Ok((value, images)) => {
                let links = self.reply_links(tool, &value).await;
                let mut output = ToolOutput::success(value, images);
                output.links = links;
                output
            }
            Err(failure) => ToolOutput::failure(failure),
        };
        budget::cap_reply(tool, output)
    }

    /// Resource links to the outputs a successful reply condensed or left out: in a read with
    /// outputs, the long outputs of cells whose text was cut and the images not returned; in a
    /// run receipt with outputs, every long output and image not returned of its settled cells.
    pub(crate) async fn reply_links(
        &self,
        tool: ToolName,
        value: &Value,
    ) -> Vec<mcp_contract::ResourceEntry> {
        let (uri, cells): (Option<&str>, Vec<(String, bool)>) = match tool {
            ToolName::ReadNotebook => (
                value["notebook"].as_str(),
                value["cells"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|cell| cell.get("outputs").is_some())
                    .filter_map(|cell| {
                        let cut = cell["outputsTruncated"].as_bool().unwrap_or(false);
                        Some((cell["cell_id"].as_str()?.to_owned(), cut))
                    })
                    .collect(),
            ),
            _ if tool.replies_with_receipt() => {
                let receipt = if tool == ToolName::EditCells {
                    &value["execution"]
                } else {
                    value
                };
                (
                    receipt["notebookRef"].as_str(),
                    receipt["cells"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|cell| cell.get("output").is_some())
                        .filter_map(|cell| Some((cell["cellId"].as_str()?.to_owned(), true)))
                        .collect(),
                )
            }
            _ => return Vec::new(),
        };
        let Some(uri) = uri.filter(|_| !cells.is_empty()) else {
            return Vec::new();
        };
        let Ok(location) = self.host.locate(uri).await else {
            return Vec::new();
        };
        let Ok(document) = self.host.load(&location).await else {
            return Vec::new();
        };
        let notebook = &document.notebook;
        // (cell, output, thumbnail) of each returned image: a thumbnail is linked to the whole.
        let returned: Vec<(usize, usize, bool)> = value["images"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|image| {
                let output = image["outputIndex"].as_u64()? as usize;
                let cell = match image.get("cellIndex") {
                    Some(index) => index.as_u64()? as usize,
                    None => notebook.position_of_id(image["cellId"].as_str()?)?,
                };
                Some((cell, output, image["thumbnail"] == Value::Bool(true)))
            })
            .collect();
        let mut links = Vec::new();
        for (cell_id, cut) in cells {
            let Some(index) = notebook.position_of_id(&cell_id) else {
                continue;
            };
            let of_cell = |thumbnail: bool| -> HashSet<usize> {
                returned
                    .iter()
                    .filter(|(cell, _, is_thumbnail)| *cell == index && *is_thumbnail == thumbnail)
                    .map(|(_, output, _)| *output)
                    .collect()
            };
            links.extend(crate::resources::output_links(
                &location.uri,
                notebook,
                &cell_id,
                cut,
                &of_cell(false),
                &of_cell(true),
            ));
        }
        links
    }
}
